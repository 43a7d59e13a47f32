//! Other forms of a question's words, so that a mention finds the value stored in another form:
//! singular and plural ("airlines" finds "Airline"), and the adjective or demonym of a place and
//! the place ("French" finds "France", "Scotland" finds "Scottish"). English only; folded text.

/// Places and their adjectives or demonyms, folded. Countries, the nations of the United
/// Kingdom, and a few places whose adjective is common in questions. Where one adjective names
/// several places (or the reverse), each pair is listed.
const PLACES: &[(&str, &str)] = &[
    ("afghanistan", "afghan"), ("albania", "albanian"), ("algeria", "algerian"), ("america", "american"),
    ("angola", "angolan"), ("argentina", "argentine"), ("argentina", "argentinian"), ("armenia", "armenian"),
    ("australia", "australian"), ("austria", "austrian"), ("azerbaijan", "azerbaijani"), ("bahrain", "bahraini"),
    ("bangladesh", "bangladeshi"), ("belarus", "belarusian"), ("belgium", "belgian"), ("bolivia", "bolivian"),
    ("bosnia", "bosnian"), ("brazil", "brazilian"), ("britain", "british"), ("bulgaria", "bulgarian"),
    ("cambodia", "cambodian"), ("cameroon", "cameroonian"), ("canada", "canadian"), ("chile", "chilean"),
    ("china", "chinese"), ("colombia", "colombian"), ("congo", "congolese"), ("costa rica", "costa rican"),
    ("croatia", "croatian"), ("cuba", "cuban"), ("cyprus", "cypriot"), ("czech republic", "czech"),
    ("czechia", "czech"), ("denmark", "danish"), ("dominican republic", "dominican"), ("ecuador", "ecuadorian"),
    ("egypt", "egyptian"), ("el salvador", "salvadoran"), ("england", "english"), ("estonia", "estonian"),
    ("ethiopia", "ethiopian"), ("europe", "european"), ("finland", "finnish"), ("france", "french"),
    ("georgia", "georgian"), ("germany", "german"), ("ghana", "ghanaian"), ("greece", "greek"),
    ("guatemala", "guatemalan"), ("haiti", "haitian"), ("holland", "dutch"), ("honduras", "honduran"),
    ("hong kong", "hongkonger"), ("hungary", "hungarian"), ("iceland", "icelandic"), ("india", "indian"),
    ("indonesia", "indonesian"), ("iran", "iranian"), ("iraq", "iraqi"), ("ireland", "irish"),
    ("israel", "israeli"), ("italy", "italian"), ("jamaica", "jamaican"), ("japan", "japanese"),
    ("jordan", "jordanian"), ("kazakhstan", "kazakh"), ("kenya", "kenyan"), ("korea", "korean"),
    ("kosovo", "kosovar"), ("kuwait", "kuwaiti"), ("latvia", "latvian"), ("lebanon", "lebanese"),
    ("libya", "libyan"), ("lithuania", "lithuanian"), ("luxembourg", "luxembourgish"), ("malaysia", "malaysian"),
    ("malta", "maltese"), ("mexico", "mexican"), ("moldova", "moldovan"), ("monaco", "monegasque"),
    ("mongolia", "mongolian"), ("montenegro", "montenegrin"), ("morocco", "moroccan"), ("mozambique", "mozambican"),
    ("myanmar", "burmese"), ("nepal", "nepalese"), ("netherlands", "dutch"), ("new zealand", "new zealander"),
    ("nicaragua", "nicaraguan"), ("nigeria", "nigerian"), ("north korea", "north korean"), ("norway", "norwegian"),
    ("oman", "omani"), ("pakistan", "pakistani"), ("palestine", "palestinian"), ("panama", "panamanian"),
    ("paraguay", "paraguayan"), ("peru", "peruvian"), ("philippines", "filipino"), ("philippines", "philippine"),
    ("poland", "polish"), ("portugal", "portuguese"), ("puerto rico", "puerto rican"), ("qatar", "qatari"),
    ("romania", "romanian"), ("russia", "russian"), ("rwanda", "rwandan"), ("saudi arabia", "saudi"),
    ("scotland", "scottish"), ("scotland", "scots"), ("senegal", "senegalese"), ("serbia", "serbian"),
    ("singapore", "singaporean"), ("slovakia", "slovak"), ("slovenia", "slovenian"), ("somalia", "somali"),
    ("south africa", "south african"), ("south korea", "south korean"), ("spain", "spanish"),
    ("sri lanka", "sri lankan"), ("sudan", "sudanese"), ("sweden", "swedish"), ("switzerland", "swiss"),
    ("syria", "syrian"), ("taiwan", "taiwanese"), ("tanzania", "tanzanian"), ("thailand", "thai"),
    ("tunisia", "tunisian"), ("turkey", "turkish"), ("uganda", "ugandan"), ("ukraine", "ukrainian"),
    ("united arab emirates", "emirati"), ("united kingdom", "british"), ("united states", "american"),
    ("uruguay", "uruguayan"), ("usa", "american"), ("uk", "british"), ("uzbekistan", "uzbek"),
    ("venezuela", "venezuelan"), ("vietnam", "vietnamese"), ("wales", "welsh"), ("yemen", "yemeni"),
    ("zambia", "zambian"), ("zimbabwe", "zimbabwean"),
    ("africa", "african"), ("asia", "asian"), ("arctic", "arctic"), ("california", "californian"),
    ("texas", "texan"), ("new york", "new yorker"), ("paris", "parisian"), ("london", "londoner"),
    ("rome", "roman"), ("berlin", "berliner"), ("tokyo", "tokyoite"), ("bavaria", "bavarian"),
    ("catalonia", "catalan"), ("flanders", "flemish"), ("quebec", "quebecois"), ("sicily", "sicilian"),
    // Demonyms that are nouns of their own (their plurals come from plural()).
    ("denmark", "dane"), ("finland", "finn"), ("sweden", "swede"), ("poland", "pole"), ("scotland", "scot"),
    ("britain", "brit"), ("britain", "briton"), ("turkey", "turk"), ("spain", "spaniard"), ("iceland", "icelander"),
    ("wales", "welshman"), ("england", "englishman"), ("ireland", "irishman"), ("netherlands", "dutchman"),
    ("france", "frenchman"), ("new zealand", "kiwi"), ("philippines", "filipina"), ("latvia", "latvian"),
    ("thailand", "thai"), ("arabia", "arab"), ("uzbekistan", "uzbek"), ("kazakhstan", "kazakh"),
];

/// Words whose plural is not made by a rule.
const IRREGULAR: &[(&str, &str)] = &[
    ("child", "children"), ("person", "people"), ("man", "men"), ("woman", "women"), ("mouse", "mice"),
    ("goose", "geese"), ("tooth", "teeth"), ("foot", "feet"), ("ox", "oxen"), ("criterion", "criteria"),
    ("datum", "data"), ("medium", "media"), ("index", "indices"), ("analysis", "analyses"),
];

/// Words the rules would spoil: they end like a plural, or are the same in both numbers.
const INVARIANT: &[&str] = &[
    "analysis", "athletics", "bus", "business", "chassis", "chess", "class", "corps", "diabetes", "glass",
    "gas", "news", "physics", "politics", "press", "series", "species", "status", "success", "texas", "this",
    "us", "ups", "swiss", "swimming", "bias", "atlas", "canvas", "lens", "campus", "virus", "paris",
    "thus", "plus", "minus", "its", "has", "was", "is", "does", "yes", "dallas", "athens", "wales", "kansas",
    "arkansas", "illinois", "philippines", "netherlands", "bahamas", "seychelles", "maldives",
];

/// Abbreviations and the words they stand for, folded (fold() has already dropped the dots).
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("assn", "association"), ("ave", "avenue"), ("blvd", "boulevard"), ("bros", "brothers"), ("co", "company"),
    ("corp", "corporation"), ("dept", "department"), ("dr", "drive"), ("ft", "fort"), ("govt", "government"),
    ("hosp", "hospital"), ("inc", "incorporated"), ("intl", "international"), ("jr", "junior"), ("ltd", "limited"),
    ("mfg", "manufacturing"), ("mt", "mount"), ("mtn", "mountain"), ("natl", "national"), ("rd", "road"),
    ("sr", "senior"), ("st", "saint"), ("st", "street"), ("univ", "university"), ("uk", "united kingdom"),
    ("us", "united states"), ("usa", "united states"),
];

/// The long forms of an abbreviation, and the abbreviations of a word or phrase.
pub fn abbreviations(phrase: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (short, long) in ABBREVIATIONS {
        if *short == phrase && !out.contains(long) {
            out.push(long);
        }
        if *long == phrase && !out.contains(short) {
            out.push(short);
        }
    }
    out
}

/// The singular of a folded word, when it looks like a plural.
pub fn singular(word: &str) -> Option<String> {
    if word.len() < 4 || INVARIANT.contains(&word) || !word.ends_with('s') && !IRREGULAR.iter().any(|(_, p)| *p == word) {
        return IRREGULAR.iter().find(|(_, p)| *p == word).map(|(s, _)| s.to_string());
    }
    if let Some((s, _)) = IRREGULAR.iter().find(|(_, p)| *p == word) {
        return Some(s.to_string());
    }
    if let Some(stem) = word.strip_suffix("ies") {
        return Some(format!("{stem}y"));
    }
    for end in ["sses", "shes", "ches", "xes", "zes"] {
        if word.ends_with(end) {
            return Some(word[..word.len() - 2].to_string());
        }
    }
    if word.ends_with("ss") || word.ends_with("us") || word.ends_with("is") {
        return None;
    }
    word.strip_suffix('s').map(str::to_string)
}

/// The plural of a folded word.
pub fn plural(word: &str) -> Option<String> {
    // "united" and "flying" are not nouns: no "uniteds".
    let participle = word.len() > 4 && (word.ends_with("ed") || word.ends_with("ing"));
    if word.len() < 3 || participle || INVARIANT.contains(&word) || word.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    if let Some((_, p)) = IRREGULAR.iter().find(|(s, _)| *s == word) {
        return Some(p.to_string());
    }
    if IRREGULAR.iter().any(|(_, p)| *p == word) || word.ends_with('s') && singular(word).is_some() {
        return None;
    }
    let bytes = word.as_bytes();
    let before_last = bytes.get(bytes.len().wrapping_sub(2)).copied().unwrap_or(b'a');
    if word.ends_with('y') && !b"aeiou".contains(&before_last) {
        return Some(format!("{}ies", &word[..word.len() - 1]));
    }
    if ["s", "x", "z", "ch", "sh"].iter().any(|e| word.ends_with(e)) {
        return Some(format!("{word}es"));
    }
    Some(format!("{word}s"))
}

/// The places an adjective or demonym names, and the adjectives of a place.
pub fn places(phrase: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (place, adjective) in PLACES {
        if *adjective == phrase && !out.contains(place) {
            out.push(place);
        }
        if *place == phrase && !out.contains(adjective) {
            out.push(adjective);
        }
    }
    out
}

/// Other forms of a folded phrase: each word in the other number, and the phrase (or its last
/// word) as a place or an adjective. At most `max`; the phrase itself is not among them.
pub fn variants(phrase: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |v: String| {
        if v != phrase && !v.is_empty() && !out.contains(&v) && out.len() < max {
            out.push(v);
        }
    };
    // The whole phrase as a place or an adjective, or written out or abbreviated, first: they
    // name a value outright ("united states" -> "usa").
    for p in places(phrase) {
        push(p.to_string());
    }
    for a in abbreviations(phrase) {
        push(a.to_string());
    }
    let words: Vec<&str> = phrase.split(' ').collect();
    if let Some((last, head)) = words.split_last() {
        if words.len() > 1 {
            for p in places(last) {
                push(format!("{} {p}", head.join(" ")));
            }
        }
        for w in [singular(last), plural(last)].into_iter().flatten() {
            if words.len() == 1 {
                push(w.clone());
                for p in places(&w) {
                    push(p.to_string());
                }
            } else {
                push(format!("{} {w}", head.join(" ")));
            }
        }
    }
    // Words abbreviated or written out one at a time ("st louis" <-> "saint louis").
    for (i, w) in words.iter().enumerate().filter(|_| words.len() > 1) {
        for a in abbreviations(w) {
            let mut v: Vec<&str> = words.clone();
            v[i] = a;
            push(v.join(" "));
        }
    }
    // The first word in the other number too ("airlines flights" -> "airline flights").
    if words.len() > 1 {
        for w in [singular(words[0]), plural(words[0])].into_iter().flatten() {
            push(std::iter::once(w.as_str()).chain(words[1..].iter().copied()).collect::<Vec<_>>().join(" "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(singular("airlines").as_deref(), Some("airline"));
        assert_eq!(singular("cities").as_deref(), Some("city"));
        assert_eq!(singular("boxes").as_deref(), Some("box"));
        assert_eq!(singular("churches").as_deref(), Some("church"));
        assert_eq!(singular("people").as_deref(), Some("person"));
        assert_eq!(singular("status"), None);
        assert_eq!(singular("swiss"), None);
        assert_eq!(singular("glass"), None);
        assert_eq!(plural("airline").as_deref(), Some("airlines"));
        assert_eq!(plural("city").as_deref(), Some("cities"));
        assert_eq!(plural("day").as_deref(), Some("days"));
        assert_eq!(plural("box").as_deref(), Some("boxes"));
        assert_eq!(plural("child").as_deref(), Some("children"));
        assert_eq!(plural("cats"), None);
        assert_eq!(plural("terminal 5"), None);
    }

    #[test]
    fn places_and_adjectives() {
        assert_eq!(places("french"), vec!["france"]);
        assert_eq!(places("france"), vec!["french", "frenchman"]);
        assert!(places("dutch").contains(&"netherlands"));
        assert!(places("american").contains(&"united states"));
        assert!(places("scotland").contains(&"scottish"));
        assert!(places("aberdeen").is_empty());
        assert!(variants("danes", 8).contains(&"denmark".to_string()), "{:?}", variants("danes", 8));
    }

    #[test]
    fn variants_of_phrases() {
        assert!(variants("french", 8).contains(&"france".to_string()));
        assert!(variants("airlines", 8).contains(&"airline".to_string()));
        assert!(variants("french airlines", 8).contains(&"french airline".to_string()));
        assert!(variants("scottish", 8).contains(&"scotland".to_string()));
        assert!(variants("italians", 8).contains(&"italy".to_string()), "{:?}", variants("italians", 8));
        assert!(!variants("airline", 8).contains(&"airline".to_string()));
        assert!(variants("x", 8).is_empty());
        assert!(variants("chinese restaurants", 2).len() <= 2);
        assert!(variants("st louis", 8).contains(&"saint louis".to_string()));
        assert!(variants("saint louis", 8).contains(&"st louis".to_string()));
        assert!(variants("intl airport", 8).contains(&"international airport".to_string()));
        assert!(variants("usa", 8).contains(&"united states".to_string()));
        assert_eq!(&variants("united states", 4)[..3], &["american", "us", "usa"]);
        assert_eq!(plural("united"), None);
    }
}
