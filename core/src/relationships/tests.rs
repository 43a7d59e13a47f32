use super::names::{link, schema_prefix, singular, words, TableNames};
use super::*;

fn names(table: &str, columns: &[&str]) -> TableNames {
    TableNames::new(table, columns, "")
}

#[test]
fn words_split_snake_camel_and_punctuation() {
    assert_eq!(words("caused_by_ship_id"), ["caused", "by", "ship", "id"]);
    assert_eq!(words("sbTxCustId"), ["sb", "tx", "cust", "id"]);
    assert_eq!(words("Order Items"), ["order", "items"]);
    assert_eq!(words("x2Y"), ["x2", "y"]);
    assert!(words("__").is_empty());
}

#[test]
fn singular_by_ending() {
    for (plural, one) in [("countries", "country"), ("classes", "class"), ("pets", "pet"), ("boxes", "box"), ("matches", "match")] {
        assert_eq!(singular(plural), one);
    }
    for same in ["address", "status", "analysis", "bus", "id", "sms"] {
        assert_eq!(singular(same), same, "{same}");
    }
}

#[test]
fn a_column_named_after_a_table_links_to_its_identifier() {
    let visitor = names("visitor", &["id", "name", "age"]);
    let visit = names("visit", &["museum_id", "visitor_id", "num_of_ticket"]);
    assert_eq!(link(&visit, "visitor_id", &visitor, "id", false), Some(0.95));
    // a word of a longer name, and a name ending in the table's
    let ship = names("ship", &["id", "name", "tonnage"]);
    let death = names("death", &["caused_by_ship_id", "id", "note"]);
    assert_eq!(link(&death, "caused_by_ship_id", &ship, "id", false), Some(0.9));
    let makers = names("car_makers", &["id", "maker", "fullname"]);
    let models = names("model_list", &["modelid", "maker", "model"]);
    assert_eq!(link(&models, "maker", &makers, "id", false), Some(0.8));
}

#[test]
fn same_names_link_only_to_the_table_they_identify() {
    let student = names("student", &["stuid", "lname", "age"]);
    let has_pet = names("has_pet", &["stuid", "petid"]);
    assert_eq!(link(&has_pet, "stuid", &student, "stuid", false), Some(0.85));
    // last_name identifies no doctor, whatever the data says
    let doctors = names("doctors", &["doc_id", "first_name", "last_name"]);
    let patients = names("patients", &["patient_id", "first_name", "last_name"]);
    assert_eq!(link(&patients, "last_name", &doctors, "last_name", false), None);
    // merchant_id in coupons names merchants, not coupons
    let coupons = names("coupons", &["cid", "merchant_id", "code"]);
    let balances = names("merchant_balance_daily", &["merchant_id", "balance", "updated_at"]);
    assert_eq!(link(&balances, "merchant_id", &coupons, "merchant_id", false), None);
    // unless it is declared the key
    assert_eq!(link(&balances, "merchant_id", &coupons, "merchant_id", true), Some(0.85));
}

#[test]
fn a_name_of_the_whole_table_beats_a_same_name_sharing_one_word() {
    // claim_summary_id names claim_summary; another table's claim_summary_id (its own
    // reference, unique in a small sample) shares the name but only the word "summary"
    let claims = names("claim_summary", &["id", "total", "status"]);
    let routes = names("route_summary", &["id", "claim_summary_id", "distance"]);
    let lines = names("account_attachment", &["id", "claim_summary_id", "file"]);
    let right = link(&lines, "claim_summary_id", &claims, "id", false).expect("names it");
    let wrong = link(&lines, "claim_summary_id", &routes, "claim_summary_id", false).expect("same name");
    assert!(right > wrong, "{right} {wrong}");
    // the same name and the whole table's name: the strongest there is
    let stadium = names("stadium", &["stadium_id", "name", "capacity"]);
    let concert = names("concert", &["concert_id", "stadium_id", "year"]);
    assert_eq!(link(&concert, "stadium_id", &stadium, "stadium_id", false), Some(1.0));
}

#[test]
fn two_bare_identifiers_say_nothing() {
    let cars = names("cars", &["id", "make", "model"]);
    let sales = names("sales", &["id", "car_id", "price"]);
    assert_eq!(link(&sales, "id", &cars, "id", false), None);
    assert_eq!(link(&sales, "car_id", &cars, "id", false), Some(0.95));
}

#[test]
fn glued_suffixes_abbreviations_and_initials() {
    let continents = names("continents", &["contid", "continent"]);
    let countries = names("countries", &["countryid", "countryname", "continent"]);
    assert_eq!(link(&countries, "continent", &continents, "contid", false), Some(0.95));
    let makers = names("car_makers", &["id", "maker", "country"]);
    assert_eq!(link(&makers, "country", &countries, "countryid", false), Some(0.95));
    // uid identifies users by its initial; user_id names users
    let users = names("users", &["uid", "username", "email"]);
    let sessions = names("user_sessions", &["user_id", "session_start"]);
    assert_eq!(link(&sessions, "user_id", &users, "uid", false), Some(0.95));
    // an initial alone names nothing of another table
    let invoices = names("invoices", &["iid", "total", "uid"]);
    assert_eq!(link(&invoices, "iid", &users, "uid", false), None);
}

#[test]
fn prefixes_every_column_or_table_shares_are_taken_off() {
    let tables = ["sbCustomer", "sbTicker", "sbTransaction"];
    let p = schema_prefix(tables.iter().copied());
    assert_eq!(p, "sb");
    let cust = TableNames::new("sbcustomer", &["sbcustid", "sbcustname", "sbcustemail"], &p);
    let ticker = TableNames::new("sbticker", &["sbtickerid", "sbtickersymbol", "sbtickername"], &p);
    let tx = TableNames::new("sbtransaction", &["sbtxid", "sbtxcustid", "sbtxtickerid", "sbtxamount"], &p);
    assert_eq!(link(&tx, "sbtxcustid", &cust, "sbcustid", false), Some(0.8));
    assert_eq!(link(&tx, "sbtxtickerid", &ticker, "sbtickerid", false), Some(0.95));
    assert_eq!(link(&tx, "sbtxamount", &ticker, "sbtickerid", false), None);
    // no prefix when a name would be left with nothing of its own
    assert_eq!(schema_prefix(["ab", "abc"].iter().copied()), "");
    assert_eq!(schema_prefix(["orders"].iter().copied()), "");
}

// --- inference over profiles ---------------------------------------------------------------

fn col(name: &str, ty: &str, values: &[&str]) -> ColumnProfile {
    let mut distinct: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    distinct.sort();
    distinct.dedup();
    ColumnProfile {
        name: name.into(),
        type_name: ty.into(),
        nulls: 0,
        distinct: distinct.len() as i64,
        values: distinct,
        ..Default::default()
    }
}

fn table(name: &str, rows: i64, columns: Vec<ColumnProfile>) -> TableProfile {
    TableProfile { oid: 0, schema: "public".into(), name: name.into(), rows, complete: true, declared_key: false, owner: 10, columns }
}

/// A database answering probes from the profiles' own values (as if it held just those), and
/// counting what it was asked.
#[derive(Default)]
struct Db {
    probes: usize,
    timeout: bool,
    pair_counts: HashMap<(usize, usize), i64>,
}

impl Probe for Db {
    fn found(&mut self, _t: &TableProfile, column: &ColumnProfile, values: &[String]) -> Option<usize> {
        self.probes += 1;
        if self.timeout {
            return None;
        }
        Some(values.iter().filter(|v| column.values.contains(v)).count())
    }
    fn distinct_pairs(&mut self, _t: &TableProfile, pairs: &[(usize, usize)]) -> Vec<Option<i64>> {
        pairs.iter().map(|p| self.pair_counts.get(p).copied()).collect()
    }
}

fn library() -> Vec<TableProfile> {
    vec![
        table("authors", 3, vec![col("author_id", "int4", &["1", "2", "3"]), col("name", "text", &["Ann", "Bo", "Cy"])]),
        table(
            "books",
            4,
            vec![
                col("book_id", "int4", &["10", "11", "12", "13"]),
                col("author_id", "int4", &["1", "1", "2", "3"]),
                col("title", "text", &["A", "B", "C", "D"]),
            ],
        ),
        table(
            "loans",
            5,
            vec![
                col("book_id", "int8", &["10", "10", "11", "12", "13"]),
                col("member", "varchar", &["m1", "m2", "m1", "m3", "m2"]),
                col("day", "date", &["2024-01-01"; 5]),
            ],
        ),
        table("members", 3, vec![col("code", "varchar", &["m1", "m2", "m3"]), col("name", "text", &["X", "Y", "Z"])]),
    ]
}

fn found(f: &Findings, tables: &[TableProfile]) -> Vec<String> {
    let n = |(t, c): (usize, usize)| format!("{}.{}", tables[t].name, tables[t].columns[c].name);
    f.links.iter().map(|l| format!("{} -> {}", n(l.from), n(l.to))).collect()
}

#[test]
fn another_owners_table_is_never_a_target() {
    // mallory's look-alike "authors" in her own schema, holding every author id and more: the
    // names and values would link books.author_id to it as strongly as to the real one.
    let mut tables = library();
    let mut planted = table("authors", 5, vec![col("author_id", "int4", &["1", "2", "3", "4", "5"])]);
    planted.schema = "mallory".into();
    planted.owner = 99;
    tables.push(planted);
    let f = infer(&tables, &mut Db::default());
    let got = found(&f, &tables);
    assert!(got.contains(&"books.author_id -> authors.author_id".to_string()), "{got:?}");
    assert!(f.links.iter().all(|l| tables[l.to.0].owner == tables[l.from.0].owner), "{got:?}");
    // and her tables link to nothing of another owner's, even where names and values agree
    let mut orders = table("orders", 3, vec![col("book_id", "int4", &["10", "11", "12"])]);
    orders.owner = 99;
    tables.push(orders);
    let f = infer(&tables, &mut Db::default());
    assert!(f.links.iter().all(|l| tables[l.to.0].owner == tables[l.from.0].owner), "{:?}", found(&f, &tables));
}

#[test]
fn tables_of_one_owner_in_different_schemas_are_linked() {
    let mut tables = library();
    tables[0].schema = "crm".into();
    let f = infer(&tables, &mut Db::default());
    assert!(found(&f, &tables).contains(&"books.author_id -> authors.author_id".to_string()));
}

#[test]
fn relationships_whose_names_and_values_agree_are_found() {
    let tables = library();
    let f = infer(&tables, &mut Db::default());
    assert_eq!(
        found(&f, &tables),
        ["books.author_id -> authors.author_id", "loans.book_id -> books.book_id", "loans.member -> members.code"]
    );
    let l = &f.links[0];
    assert!((l.score - 1.0).abs() < 1e-6, "{l:?}");
    assert!(l.evidence.contains("3 of 3 distinct values"), "{}", l.evidence);
    assert!(l.evidence.contains("unique and not null in all 3 rows"), "{}", l.evidence);
}

#[test]
fn values_the_key_lacks_rule_a_relationship_out() {
    let mut tables = library();
    // two of four authors unknown: not a foreign key, whatever the names say
    tables[1].columns[1] = col("author_id", "int4", &["1", "2", "7", "8"]);
    let f = infer(&tables, &mut Db::default());
    assert!(!found(&f, &tables).iter().any(|l| l.starts_with("books.author_id")), "{:?}", found(&f, &tables));
    // one orphan in ten is tolerated (MIN_CONTAINED)
    let mut tables = library();
    let ids: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
    let refs: Vec<String> = (1..=9).map(|i| i.to_string()).chain(["99".to_string()]).collect();
    tables[0].columns[0] = col("author_id", "int4", &ids.iter().map(String::as_str).collect::<Vec<_>>());
    tables[0].rows = 10;
    tables[0].columns[1] = col("name", "text", &ids.iter().map(String::as_str).collect::<Vec<_>>());
    tables[1].columns[1] = col("author_id", "int4", &refs.iter().map(String::as_str).collect::<Vec<_>>());
    let f = infer(&tables, &mut Db::default());
    let l = f.links.iter().find(|l| l.from == (1, 1)).expect("found");
    assert!((l.score - 0.9).abs() < 1e-6, "{l:?}");
}

#[test]
fn a_key_must_be_unique_and_the_types_must_compare() {
    let mut tables = library();
    tables[0].columns[0] = col("author_id", "int4", &["1", "2", "2"]); // 3 rows, 2 distinct
    let f = infer(&tables, &mut Db::default());
    assert!(!found(&f, &tables).iter().any(|l| l.contains("authors")), "{:?}", found(&f, &tables));
    let mut tables = library();
    tables[1].columns[1].type_name = "text".into();
    let f = infer(&tables, &mut Db::default());
    assert!(!found(&f, &tables).iter().any(|l| l.starts_with("books.author_id")));
    // floats and dates are never keys nor references
    let mut tables = library();
    tables[0].columns[0].type_name = "float8".into();
    tables[1].columns[1].type_name = "float8".into();
    assert!(!found(&infer(&tables, &mut Db::default()), &tables).iter().any(|l| l.starts_with("books.author_id")));
}

#[test]
fn declared_foreign_keys_are_left_alone() {
    let mut tables = library();
    tables[1].columns[1].declared_reference = true;
    let f = infer(&tables, &mut Db::default());
    assert!(!found(&f, &tables).iter().any(|l| l.starts_with("books.author_id")));
}

#[test]
fn a_declared_reference_is_no_key_for_others() {
    // has_pet.petid references pets (declared) and happens to be unique: pets.petid must not
    // be read as referencing it back
    let mut tables = vec![
        table("pets", 3, vec![col("petid", "int4", &["1", "2", "3"])]),
        table("has_pet", 3, vec![col("stuid", "int4", &["7", "8", "9"]), col("petid", "int4", &["1", "2", "3"])]),
    ];
    tables[0].columns[0].declared_unique = true;
    tables[0].declared_key = true;
    tables[1].columns[1].declared_reference = true;
    let f = infer(&tables, &mut Db::default());
    assert!(f.links.is_empty(), "{:?}", found(&f, &tables));
    // declared unique as well (a one-to-one extension table): a key others may point to
    tables[1].columns[1].declared_unique = true;
    tables.push(table("vet_visits", 2, vec![col("petid", "int4", &["1", "2"])]));
    let f = infer(&tables, &mut Db::default());
    assert!(found(&f, &tables).iter().any(|l| l.starts_with("vet_visits.petid")), "{:?}", found(&f, &tables));
}

#[test]
fn large_keys_are_probed_and_an_unanswered_probe_infers_nothing() {
    let mut tables = library();
    tables[0].complete = false; // authors sampled: its key's values are not all in hand
    let mut db = Db::default();
    let f = infer(&tables, &mut db);
    assert_eq!(db.probes, 1);
    assert!(found(&f, &tables).contains(&"books.author_id -> authors.author_id".to_string()));
    let mut db = Db { timeout: true, ..Db::default() };
    let f = infer(&tables, &mut db);
    assert!(!found(&f, &tables).iter().any(|l| l.starts_with("books.author_id")));
    assert_eq!(f.unchecked, vec![((1, 1), (0, 0))]);
}

#[test]
fn one_to_one_keeps_the_direction_toward_the_table_the_name_identifies() {
    let tables = vec![
        table("pets", 3, vec![col("petid", "int4", &["1", "2", "3"]), col("weight", "int4", &["5", "6", "7"])]),
        table("has_pet", 3, vec![col("stuid", "int4", &["7", "8", "9"]), col("petid", "int4", &["1", "2", "3"])]),
    ];
    let f = infer(&tables, &mut Db::default());
    assert_eq!(found(&f, &tables), ["has_pet.petid -> pets.petid"]);
}

#[test]
fn keys_of_tables_without_a_declared_one() {
    let mut tables = library();
    // authors and books: an identifier unique in the data; members: its code; loans: none
    // alone, so the pair of a reference and another column unique together
    let mut db = Db::default();
    db.pair_counts.insert((0, 1), 5);
    let f = infer(&tables, &mut db);
    let keys: Vec<(String, Vec<usize>)> = f.keys.iter().map(|k| (tables[k.table].name.clone(), k.columns.clone())).collect();
    assert_eq!(
        keys,
        [("authors".into(), vec![0]), ("books".into(), vec![0]), ("loans".into(), vec![0, 1]), ("members".into(), vec![0])]
    );
    // a declared key: nothing to find; a unique column no name ties to the table: not a key
    tables[0].declared_key = true;
    tables[3].columns[0].name = "colour".into();
    let f = infer(&tables, &mut Db::default());
    assert!(!f.keys.iter().any(|k| k.table == 0 || k.table == 3), "{:?}", f.keys);
}

#[test]
fn an_identifier_is_the_key_before_a_column_a_relationship_points_to() {
    let tables = vec![
        table("model_list", 3, vec![col("modelid", "int4", &["1", "2", "3"]), col("model", "text", &["a", "b", "c"])]),
        table("car_names", 4, vec![col("makeid", "int4", &["1", "2", "3", "4"]), col("model", "text", &["a", "a", "b", "c"])]),
    ];
    let mut db = Db::default();
    // a pair with a column unique alone is never asked for
    db.pair_counts.insert((0, 1), 4);
    let f = infer(&tables, &mut db);
    assert_eq!(found(&f, &tables), ["car_names.model -> model_list.model"]);
    let keys: Vec<(usize, Vec<usize>)> = f.keys.iter().map(|k| (k.table, k.columns.clone())).collect();
    assert_eq!(keys, [(0, vec![0]), (1, vec![0])]);
}

#[test]
fn among_equal_names_the_column_that_identifies_its_table_wins() {
    // budget_line.lead_target_id names lead_target; lead_target has its id and a reference of
    // its own (customer_target_id), both unique in a small table
    let ids = ["1", "2", "3"];
    let tables = vec![
        table("lead_target", 3, vec![col("id", "int4", &ids), col("customer_target_id", "int4", &ids)]),
        table("budget_line", 3, vec![col("id", "int4", &ids), col("lead_target_id", "int4", &ids)]),
    ];
    let f = infer(&tables, &mut Db::default());
    let to: Vec<(usize, usize)> = f.links.iter().filter(|l| l.from == (1, 1)).map(|l| l.to).collect();
    assert_eq!(to, [(0, 0)]);
}

#[test]
fn a_table_of_the_columns_own_schema_comes_first() {
    let mut tables = library();
    let mut other = tables[0].clone();
    other.schema = "archive".into();
    tables.push(other);
    let f = infer(&tables, &mut Db::default());
    let to: Vec<usize> = f.links.iter().filter(|l| l.from == (1, 1)).map(|l| l.to.0).collect();
    assert_eq!(to, [0]);
    // with no table of that name in its own schema, another schema's will do
    tables[0].name = "writers".into();
    let f = infer(&tables, &mut Db::default());
    let to: Vec<usize> = f.links.iter().filter(|l| l.from == (1, 1)).map(|l| l.to.0).collect();
    assert_eq!(to, [4]);
}

#[test]
fn one_row_proves_no_key() {
    let tables = vec![
        table("shop", 1, vec![col("shop_id", "int4", &["1"])]),
        table("hiring", 1, vec![col("shop_id", "int4", &["1"])]),
    ];
    let f = infer(&tables, &mut Db::default());
    assert!(f.links.is_empty() && f.keys.is_empty(), "{f:?}");
}

#[test]
fn a_wide_schema_is_matched_through_indexes() {
    // 2,000 tables that all name each other loosely: the candidates stay few
    let mut tables = Vec::new();
    for i in 0..2000 {
        let vals: Vec<String> = (0..5).map(|v| format!("{}", v + i)).collect();
        let v: Vec<&str> = vals.iter().map(String::as_str).collect();
        tables.push(table(&format!("entity{i}_line"), 5, vec![col("id", "int4", &v), col(&format!("entity{}_id", i / 2), "int4", &v)]));
    }
    let started = std::time::Instant::now();
    let f = infer(&tables, &mut Db::default());
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    assert!(!f.links.is_empty());
}

#[test]
fn a_table_is_read_whole_only_when_all_its_rows_came() {
    // small: whole, one row more asked for
    let s = Sampling::for_table(50.0, 100);
    assert_eq!(s, Sampling { limit: 101, percent: 100.0 });
    assert!(s.whole(50, 100));
    // its estimate was stale: the extra row came, so it was not read whole
    assert!(!s.whole(101, 100));
    // a little larger than wanted: a sample of 3x the share would be over 100 %, so the table
    // is read from the start, and not whole
    let s = Sampling::for_table(150.0, 100);
    assert_eq!(s.limit, 101);
    assert!(!s.whole(101, 100));
    // large: a block sample of 3x the share needed
    let s = Sampling::for_table(1_000_000.0, 10_000);
    assert_eq!(s.limit, 10_000);
    assert!((s.percent - 3.0).abs() < 1e-9);
    assert!(!s.whole(10_000, 10_000));
    // never analysed (-1): read from the start, whole if it is small
    assert_eq!(Sampling::for_table(-1.0, 100).limit, 101);
}

#[test]
fn values_kept_per_column_share_one_budget() {
    assert_eq!(values_per_column(10), 1000);
    assert_eq!(values_per_column(2_000), 250);
    assert_eq!(values_per_column(1_000_000), 20);
    assert_eq!(values_per_column(0), 1000);
}
