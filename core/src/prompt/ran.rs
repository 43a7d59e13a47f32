//! An error raised while a generated query ran, as the model may be told it: only words of
//! nl2sql's own. Such an error may print a row's text anywhere, in any form (unquoted, between
//! quotes it holds itself, after a ": " of its own, in the server's language), so its words are
//! never repeated; where the message is one of PostgreSQL's common English messages (a fixed
//! list below), the model is told that message with every part that may come from a row left
//! out, else the SQLSTATE's condition name.

/// Messages repeated as they are, when the whole message is one of them.
const EXACT: &[&str] = &[
    "division by zero",
    "integer out of range",
    "bigint out of range",
    "smallint out of range",
    "numeric field overflow",
    "value out of range: overflow",
    "value out of range: underflow",
    "timestamp out of range",
    "date out of range",
    "interval out of range",
    "more than one row returned by a subquery used as an expression",
    "cannot take logarithm of zero",
    "cannot take logarithm of a negative number",
    "cannot take square root of a negative number",
    "zero raised to a negative power is undefined",
    "a negative number raised to a non-integer power yields a complex result",
    "LIMIT must not be negative",
    "OFFSET must not be negative",
    "negative substring length not allowed",
    "argument of ntile must be greater than zero",
    "step size cannot equal zero",
    "set-valued function called in context that cannot accept a set",
    "FULL JOIN is only supported with merge-joinable or hash-joinable join conditions",
    "could not implement GROUP BY",
    "could not implement DISTINCT",
    "could not determine which collation to use for string comparison",
    "input is out of range",
    "value overflows numeric format",
    "date out of range for timestamp",
    "field position must not be zero",
    "invalid escape string",
    "LIKE pattern must not end with escape character",
    "cannot extract elements from a scalar",
    "cannot extract elements from an object",
    "cannot get array length of a scalar",
    "count must be greater than zero",
    "too few arguments for format()",
    "cannot accumulate arrays of different dimensionality",
    "null character not permitted",
];

/// Messages of which only the start is repeated; what follows may be a row's text.
const START: &[&str] = &[
    "date/time field value out of range",
    "invalid input value for enum",
    "invalid regular expression",
    "malformed array literal",
    "malformed range literal",
    "malformed record literal",
    "value too long for type",
    "invalid value for",
    "invalid input syntax for type",
];

/// Built-in types whose name a message may repeat (the type a query casts to).
const TYPES: &[&str] = &[
    "integer",
    "bigint",
    "smallint",
    "numeric",
    "real",
    "double precision",
    "boolean",
    "date",
    "time",
    "timestamp",
    "time without time zone",
    "time with time zone",
    "timestamp without time zone",
    "timestamp with time zone",
    "interval",
    "json",
    "jsonb",
    "uuid",
    "money",
    "inet",
    "cidr",
    "oid",
    "bytea",
];

/// The message as the model may be told it, None where it is none of the known ones.
/// `invalid input syntax for type integer: "…"` keeps the type (the one the query casts to);
/// `value "…" is out of range for type integer` keeps the type after the value, which is the
/// end of PostgreSQL's text whatever the value holds.
pub fn told(message: &str) -> Option<String> {
    if let Some(m) = EXACT.iter().find(|m| **m == message) {
        return Some(m.to_string());
    }
    if let Some(rest) = message.strip_prefix("invalid input syntax for type ") {
        if let Some(t) = TYPES.iter().find(|t| rest.strip_prefix(**t).is_some_and(|r| r.starts_with(": "))) {
            return Some(format!("invalid input syntax for type {t}: \"…\""));
        }
    }
    // A slot between quotes, and PostgreSQL's text on both sides of it (the end is PostgreSQL's
    // whatever the slot holds): told with the slot left out.
    for (start, end) in [("value \"", "\" is out of range for type "), ("\"", "\" is out of range for type "), ("unit \"", "\" not recognized for type ")] {
        if message.starts_with(start) {
            if let Some(t) = TYPES.iter().find(|t| message.ends_with(&format!("{end}{t}"))) {
                return Some(format!("{start}…{end}{t}"));
            }
        }
    }
    for (start, end, told) in [
        ("time zone \"", "\" not recognized", "time zone \"…\" not recognized"),
        ("invalid value \"", "\"", "invalid value \"…\" for \"…\""),
        ("timestamp units \"", "\" not recognized", "timestamp units \"…\" not recognized"),
    ] {
        if message.starts_with(start) && message.ends_with(end) && message.len() > start.len() + end.len() {
            return Some(told.to_string());
        }
    }
    START.iter().find(|s| message.strip_prefix(**s).is_some_and(|r| r.starts_with([' ', ':']))).map(|s| format!("{s} …"))
}

/// The condition name of a SQLSTATE an error raised while a query ran often has.
pub fn condition(code: &str) -> Option<&'static str> {
    Some(match code {
        "21000" => "cardinality_violation",
        "22001" => "string_data_right_truncation",
        "22003" => "numeric_value_out_of_range",
        "22004" => "null_value_not_allowed",
        "22007" => "invalid_datetime_format",
        "22008" => "datetime_field_overflow",
        "22012" => "division_by_zero",
        "22021" => "character_not_in_repertoire",
        "22023" => "invalid_parameter_value",
        "2201B" => "invalid_regular_expression",
        "2202E" => "array_subscript_error",
        "22P02" => "invalid_text_representation",
        "0A000" => "feature_not_supported",
        "42601" => "syntax_error",
        "42501" => "insufficient_privilege",
        "42602" => "invalid_name",
        "42704" => "undefined_object",
        "42703" => "undefined_column",
        "42P01" => "undefined_table",
        "42883" => "undefined_function",
        "42804" => "datatype_mismatch",
        "42846" => "cannot_coerce",
        "22025" => "invalid_escape_sequence",
        "2201E" => "invalid_argument_for_logarithm",
        "2201F" => "invalid_argument_for_power_function",
        "2201W" => "invalid_row_count_in_limit_clause",
        "2200N" => "invalid_xml_content",
        "22030" => "duplicate_json_object_key_value",
        "22032" => "invalid_json_text",
        "22033" => "invalid_sql_json_subscript",
        "22034" => "more_than_one_sql_json_item",
        "22035" => "no_sql_json_item",
        "22036" => "non_numeric_sql_json_item",
        "22037" => "non_unique_keys_in_a_json_object",
        "22038" => "singleton_sql_json_item_required",
        "22039" => "sql_json_array_not_found",
        _ => return None,
    })
}

/// Whether an error of this SQLSTATE, raised while PostgreSQL read the query with no code but
/// built-in functions run, is one that reading raises: a name or a type (class 42), or a literal
/// of the query's own text that its type does not read (`'abc'::int`, a date out of range).
/// Any other (a domain's CHECK, a built-in that a domain's CHECK calls and that reads a table)
/// is told as raised while the query ran.
pub fn raised_reading(code: &str) -> bool {
    code.starts_with("42") || ["22P02", "22007", "22008", "22003", "22021", "22015"].contains(&code)
}

/// Whether the C source file of PostgreSQL's that raised an error (its base name, as
/// PostgreSQL records it) is the parser's or the rewriter's: the error was raised by reading the
/// query itself, not by a function that reading ran (an input function in `regproc.c`, a
/// domain's CHECK), whose error may quote what that function read.
pub fn raised_by_reader(file: &str) -> bool {
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    (base.starts_with("parse_") || base.starts_with("rewrite")) && base.ends_with(".c")
        || ["analyze.c", "parser.c", "gram.y", "gram.c", "scan.l", "scan.c", "scansup.c", "rowsecurity.c"].contains(&base)
}

/// The error as the model may be told it: `ERROR (code): message` for a known message, else its
/// SQLSTATE (and condition name) with the message withheld.
pub fn error_text(code: &str, message: &str) -> String {
    match told(message) {
        Some(m) => format!("ERROR ({code}): {m}"),
        None => withheld(code),
    }
}

/// How the history keeps the message of an error raised while the query ran that is none of
/// the known ones.
const WITHHELD_IN_HISTORY: &str = "its message is withheld (raised while it ran, it may quote data)";

/// The message of an error raised while the query ran as a history row keeps it: as the model
/// is told it, without the SQLSTATE.
pub fn history_text(message: &str) -> String {
    told(message).unwrap_or_else(|| WITHHELD_IN_HISTORY.to_string())
}

/// The SQLSTATE of an error raised while the query ran, its message withheld.
pub fn withheld(code: &str) -> String {
    match condition(code) {
        Some(name) => format!("ERROR ({code}) raised while the query ran ({name}; its message is withheld: it may quote data)"),
        None => format!("ERROR ({code}) raised while the query ran (its message is withheld: it may quote data)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_messages_are_told_without_their_input() {
        assert_eq!(error_text("22012", "division by zero"), "ERROR (22012): division by zero");
        assert_eq!(told("invalid input syntax for type integer: \"zz_secret\"").as_deref(), Some("invalid input syntax for type integer: \"…\""));
        assert_eq!(told("invalid input syntax for type double precision: \"x: y\"").as_deref(), Some("invalid input syntax for type double precision: \"…\""));
        assert_eq!(told("value \"98765432109\" is out of range for type integer").as_deref(), Some("value \"…\" is out of range for type integer"));
        assert_eq!(told("date/time field value out of range: \"2024-13-45\"").as_deref(), Some("date/time field value out of range …"));
        assert_eq!(told("invalid input value for enum mood: \"zz_secret\"").as_deref(), Some("invalid input value for enum …"));
        assert_eq!(told("\"1e400zz\" is out of range for type double precision").as_deref(), Some("\"…\" is out of range for type double precision"));
        assert_eq!(told("unit \"zz_secret\" not recognized for type timestamp with time zone").as_deref(), Some("unit \"…\" not recognized for type timestamp with time zone"));
        assert_eq!(told("time zone \"zz_secret\" not recognized").as_deref(), Some("time zone \"…\" not recognized"));
        assert_eq!(told("invalid value \"zz\" for \"MM\"").as_deref(), Some("invalid value \"…\" for \"…\""));
        assert_eq!(told("invalid input syntax for type timestamp: \"zz_secret\"").as_deref(), Some("invalid input syntax for type timestamp: \"…\""));
        assert!(raised_reading("42703") && raised_reading("22P02") && !raised_reading("23514") && !raised_reading("XX000"));
        // The parser's and the rewriter's own files; an input function's or a domain's are not.
        for file in ["parse_relation.c", "parse_func.c", "analyze.c", "gram.y", "scan.l", "rewriteHandler.c", "../src/backend/parser/parse_expr.c"] {
            assert!(raised_by_reader(file), "{file}");
        }
        for file in ["regproc.c", "namespace.c", "domains.c", "numutils.c", "execExprInterp.c", "parse_", "xparse_relation.c.h", ""] {
            assert!(!raised_by_reader(file), "{file}");
        }
        // A type outside the list: its name is the query's, but not repeated.
        assert_eq!(told("invalid input syntax for type public.zz_secret: \"x\"").as_deref(), Some("invalid input syntax for type …"));
    }

    #[test]
    fn anything_else_is_its_sqlstate() {
        for (code, message) in [
            // A row's text as a relation's, an operator's, a function's or an encoding's name.
            ("42P01", "relation \"zz_secret\" does not exist"),
            ("42P01", "relation \"a\"zz_secret\"b\" does not exist"),
            ("42883", "operator does not exist: zz_secret"),
            ("42883", "function zz_secret(\"char\") does not exist"),
            ("42883", "aggregate x\"y\"zz_secret(*) does not exist"),
            ("42704", "zz_secret is not a valid encoding name"),
            ("42602", "improper relation name (too many dotted names): a.b.c.zz_secret: x"),
            // One character of a row, which the prompt holds somewhere.
            ("42P01", "relation \"q\" does not exist"),
            // The server's language is not English.
            ("42P01", "Relation »zz_secret« existiert nicht"),
            ("42P01", "la relation « zz_secret » n'existe pas"),
            // A known message's words with a row's text before or after them.
            ("22012", "division by zero zz_secret"),
            ("22012", "zz_secret division by zero"),
            ("22003", "value \"1\" is out of range for type zz_secret"),
            ("22P02", "invalid input syntax for typezz_secret"),
            ("22023", "unit \"x\" not recognized for type zz_secret"),
            ("22023", "time zone \"x\" not recognized zz_secret"),
        ] {
            let told = error_text(code, message);
            assert!(!told.contains("zz_secret") && !told.contains("\"q\"") && told.starts_with(&format!("ERROR ({code}")), "{told}");
            assert!(told.contains("withheld") || told.contains('…'), "{told}");
        }
        assert_eq!(
            error_text("42P01", "relation \"q\" does not exist"),
            "ERROR (42P01) raised while the query ran (undefined_table; its message is withheld: it may quote data)"
        );
        assert_eq!(withheld("XX123"), "ERROR (XX123) raised while the query ran (its message is withheld: it may quote data)");
    }
}
