//! PostgreSQL's idioms: how a question's dates relative to today, periods and ratios are written
//! in PostgreSQL, told to the model beside the question when its words call for one, and the
//! rules on the query where a rule is sure (the alignment rules of align/idioms.rs). Each can be
//! switched off alone (nl2sql.idioms), so that each one's worth is measured apart.

use serde::{Serialize, Serializer};

/// One idiom, by its name in nl2sql.idioms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idiom {
    /// A note: windows relative to today ("the past 30 days", "the last 3 months").
    Dates,
    /// A note: one row per month, week, day, year or quarter with `date_trunc`.
    Periods,
    /// A note: ratios and percentages in numeric, the divisor guarded.
    Ratios,
    /// A rule: a division of two integers becomes a numeric one.
    IntegerDivision,
    /// A rule: a grouped SELECT returning only aggregates gets its groups' labels when the
    /// question asks per something, and loses the GROUP BY when it does not.
    UnlabeledGroups,
}

impl Idiom {
    pub const EVERY: [Idiom; 5] = [Idiom::Dates, Idiom::Periods, Idiom::Ratios, Idiom::IntegerDivision, Idiom::UnlabeledGroups];

    pub fn name(self) -> &'static str {
        match self {
            Idiom::Dates => "dates",
            Idiom::Periods => "periods",
            Idiom::Ratios => "ratios",
            Idiom::IntegerDivision => "integer_division",
            Idiom::UnlabeledGroups => "unlabeled_groups",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The idioms switched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Idioms(u8);

impl Idioms {
    pub const NONE: Idioms = Idioms(0);
    /// Every idiom (a bit for each of [`Idiom::EVERY`]).
    pub const ALL: Idioms = Idioms(0b1_1111);

    pub fn has(self, i: Idiom) -> bool {
        self.0 & i.bit() != 0
    }

    pub fn with(self, i: Idiom) -> Idioms {
        Idioms(self.0 | i.bit())
    }

    /// A comma-separated list of names (blanks around them ignored, an empty list is none);
    /// None when a name is unknown.
    pub fn parse(list: &str) -> Option<Idioms> {
        let mut out = Idioms::NONE;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            out = out.with(*Idiom::EVERY.iter().find(|i| i.name().eq_ignore_ascii_case(name))?);
        }
        Some(out)
    }

    pub fn names(self) -> Vec<&'static str> {
        Idiom::EVERY.iter().filter(|i| self.has(**i)).map(|i| i.name()).collect()
    }
}

impl Serialize for Idioms {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.names().serialize(s)
    }
}

const DATES: &str = "Dates relative to today count from CURRENT_DATE: the past N days (from N days ago on) is \
d >= CURRENT_DATE - INTERVAL 'N days'; the N whole months before this one are \
d >= date_trunc('month', CURRENT_DATE) - INTERVAL 'N months' AND d < date_trunc('month', CURRENT_DATE) \
(the same with week or year); whole days come from CURRENT_DATE, not NOW().";
const PERIODS: &str = "One row per month: GROUP BY date_trunc('month', d) and return it as the month \
(the same with week, day, quarter or year), not EXTRACT of its parts.";
const RATIOS: &str = "A ratio, rate or percentage: x::numeric / NULLIF(y, 0) (times 100 for a percentage); \
dividing two integers truncates.";

/// Units a window or a period is counted in.
const UNITS: &[&str] = &["day", "days", "week", "weeks", "month", "months", "quarter", "quarters", "year", "years"];
/// Words that, before a unit, make a window relative to today.
const WINDOW: &[&str] = &["past", "last", "previous", "recent", "this", "current"];
/// Words that say relative to today by themselves.
const TODAY: &[&str] = &["today", "yesterday", "ago", "ytd", "mtd"];
/// Words that, before a unit, ask for one row per period.
const PER: &[&str] = &["per", "each", "every", "by"];
const PERIODICAL: &[&str] = &["daily", "weekly", "monthly", "quarterly", "yearly", "annually", "annual"];
/// Words asking for a ratio.
const RATIO: &[&str] = &[
    "ratio", "ratios", "rate", "rates", "percent", "percentage", "percentages", "proportion", "proportions", "fraction", "share",
    "margin", "%",
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '%'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether some word of `first` is followed by a unit within three words ("the past 30 days",
/// "each month", "last calendar week").
fn before_unit(w: &[String], first: &[&str]) -> bool {
    (0..w.len()).any(|i| first.contains(&w[i].as_str()) && unit_within(&w[i + 1..]))
}

fn unit_within(w: &[String]) -> bool {
    w.iter().take(3).any(|u| UNITS.contains(&u.as_str()))
}

/// Whether the question asks for one row per period: "per month", "each week", or "each of
/// the last 8 weeks".
fn per_period(w: &[String]) -> bool {
    (0..w.len()).any(|i| {
        PER.contains(&w[i].as_str())
            && !(w[i] == "by" && i > 0 && NOT_PER_BY.contains(&w[i - 1].as_str()))
            && (unit_within(&w[i + 1..])
                || (matches!(w[i].as_str(), "each" | "every")
                    && w[i + 1..].starts_with(&["of".to_string(), "the".to_string()])
                    && w.get(i + 3).is_some_and(|x| WINDOW.contains(&x.as_str()))
                    && unit_within(&w[i + 4..])))
    })
}

/// The notes of the idioms a question calls for, by its words (and its hint's); the notes on
/// dates and periods only when the schema has a date or time column (`dated`).
pub fn notes(asked: &str, dated: bool, on: Idioms) -> Vec<(Idiom, &'static str)> {
    let w = words(asked);
    let mut out = Vec::new();
    if on.has(Idiom::Dates) && dated && (w.iter().any(|x| TODAY.contains(&x.as_str())) || before_unit(&w, WINDOW)) {
        out.push((Idiom::Dates, DATES));
    }
    if on.has(Idiom::Periods) && dated && (w.iter().any(|x| PERIODICAL.contains(&x.as_str())) || per_period(&w)) {
        out.push((Idiom::Periods, PERIODS));
    }
    if on.has(Idiom::Ratios) && w.iter().any(|x| RATIO.contains(&x.as_str())) {
        out.push((Idiom::Ratios, RATIOS));
    }
    out
}

/// Words before which "by" sorts or groups a query's rows instead of asking per something
/// (`ORDER BY` in a follow-up's earlier query, "sorted by name").
const NOT_PER_BY: &[&str] = &["order", "group", "partition", "sort", "sorted", "ordered", "grouped", "rank", "ranked"];

/// Whether a question asks for one row per something ("for each", "per", "by country",
/// "every", "monthly"): the words [`notes`] reads, shared with the rule on unlabeled groups.
pub fn asks_per(question: &str) -> bool {
    let w = words(question);
    w.iter().enumerate().any(|(i, x)| match x.as_str() {
        "each" | "per" | "every" => true,
        "by" => !(i > 0 && NOT_PER_BY.contains(&w[i - 1].as_str())),
        other => PERIODICAL.contains(&other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(q: &str, dated: bool) -> Vec<&'static str> {
        notes(q, dated, Idioms::ALL).iter().map(|(i, _)| i.name()).collect()
    }

    #[test]
    fn windows_relative_to_today() {
        assert_eq!(chosen("How many orders in the past 30 days?", true), ["dates"]);
        assert_eq!(chosen("Sales in the last 3 calendar months, excluding the current month", true), ["dates"]);
        assert_eq!(chosen("Which users signed up yesterday?", true), ["dates"]);
        assert_eq!(chosen("Visits 2 weeks ago", true), ["dates"]);
        assert!(chosen("Users who bought within 7 days of signing up", true).is_empty());
        assert!(chosen("Orders shipped the next day", true).is_empty());
    }

    #[test]
    fn no_window_no_note() {
        assert!(chosen("What is the last name of the oldest singer?", true).is_empty());
        assert!(chosen("How many singers are there?", true).is_empty());
        assert!(chosen("Which films were released in 2015?", true).is_empty());
        // "last" before a unit, but the schema has no date: nothing to write it on
        assert!(chosen("How many orders in the past 30 days?", false).is_empty());
    }

    #[test]
    fn periods() {
        assert_eq!(chosen("What is the total revenue per month in 2023?", true), ["periods"]);
        assert_eq!(chosen("Monthly signups", true), ["periods"]);
        assert_eq!(chosen("How many transactions in each of the last 8 weeks?", true), ["dates", "periods"]);
        assert!(chosen("How many students per department?", true).is_empty());
        assert!(chosen("List films ordered by release year", true).is_empty());
        assert!(chosen("Which of the products sold each had the last 3 reviews positive?", true).is_empty());
        assert!(chosen("What is the total revenue per month?", false).is_empty());
    }

    #[test]
    fn ratios() {
        assert_eq!(chosen("What is the success rate of transactions?", false), ["ratios"]);
        assert_eq!(chosen("What percentage of users are active?", false), ["ratios"]);
        assert_eq!(chosen("What % of cars are red?", false), ["ratios"]);
        assert!(chosen("What is the average rating of each movie?", false).is_empty());
        assert!(chosen("List the rated movies", false).is_empty());
    }

    #[test]
    fn switched_off_idioms_give_no_note() {
        let only_ratios = Idioms::NONE.with(Idiom::Ratios);
        let n = notes("the rate per month in the past 3 months", true, only_ratios);
        assert_eq!(n.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [Idiom::Ratios]);
        assert!(notes("the rate per month in the past 3 months", true, Idioms::NONE).is_empty());
    }

    #[test]
    fn settings_list() {
        assert_eq!(Idioms::parse(""), Some(Idioms::NONE));
        assert_eq!(Idioms::parse(" dates , RATIOS"), Some(Idioms::NONE.with(Idiom::Dates).with(Idiom::Ratios)));
        assert_eq!(Idioms::parse("dates,nope"), None);
        let all = Idiom::EVERY.map(Idiom::name).join(",");
        assert_eq!(Idioms::parse(&all), Some(Idioms::ALL));
        assert_eq!(Idiom::EVERY.iter().fold(Idioms::NONE, |acc, i| acc.with(*i)), Idioms::ALL);
        assert_eq!(serde_json::to_string(&Idioms::NONE.with(Idiom::Periods)).unwrap_or_default(), r#"["periods"]"#);
    }

    #[test]
    fn asking_per_something() {
        assert!(asks_per("How many students in each department?"));
        assert!(asks_per("Average salary by country"));
        assert!(asks_per("monthly revenue"));
        assert!(!asks_per("How many Toyota cars were sold in the last 30 days?"));
        assert!(!asks_per("What is the average balance of wallets updated in the past week?"));
        assert!(!asks_per("List the names sorted by age"));
        assert!(!asks_per("and in 2024?\nSELECT name FROM singer ORDER BY name"));
        assert!(!asks_per("total revenue across all stores"));
    }
}
