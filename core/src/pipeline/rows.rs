//! Result rows as JSON objects: numbers, booleans and JSON stay typed, everything else is text.

use crate::ColumnInfo;
use serde_json::{Map, Number, Value};

// PostgreSQL type OIDs (pg_type.oid), stable across versions.
const BOOL: u32 = 16;
const INT8: u32 = 20;
const INT2: u32 = 21;
const INT4: u32 = 23;
const OID: u32 = 26;
const JSON: u32 = 114;
const FLOAT4: u32 = 700;
const FLOAT8: u32 = 701;
const NUMERIC: u32 = 1700;
const JSONB: u32 = 3802;

/// One value, from its text form and type.
pub fn value(text: Option<&str>, type_oid: u32) -> Value {
    let Some(t) = text else { return Value::Null };
    match type_oid {
        BOOL => match t {
            "t" => Value::Bool(true),
            "f" => Value::Bool(false),
            _ => Value::String(t.to_string()),
        },
        // NaN and Infinity have no JSON number; they stay strings, as in to_jsonb.
        INT2 | INT4 | INT8 | OID | FLOAT4 | FLOAT8 | NUMERIC => {
            serde_json::from_str::<Number>(t).map(Value::Number).unwrap_or_else(|_| Value::String(t.to_string()))
        }
        JSON | JSONB => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string())),
        _ => Value::String(t.to_string()),
    }
}

/// Unique keys for the columns: a repeated name gets _2, _3, … in order.
pub fn keys(columns: &[ColumnInfo]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(columns.len());
    for c in columns {
        let mut key = c.name.clone();
        let mut n = 1;
        while out.contains(&key) {
            n += 1;
            key = format!("{}_{n}", c.name);
        }
        out.push(key);
    }
    out
}

/// One row as a JSON object, keys in column order.
pub fn row_object(keys: &[String], columns: &[ColumnInfo], row: &[Option<String>]) -> Value {
    let mut m = Map::with_capacity(columns.len());
    for ((k, c), v) in keys.iter().zip(columns).zip(row) {
        m.insert(k.clone(), value(v.as_deref(), c.type_oid));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, type_oid: u32) -> ColumnInfo {
        ColumnInfo { name: name.into(), type_oid }
    }

    #[test]
    fn typed_values() {
        assert_eq!(value(Some("42"), INT4), serde_json::json!(42));
        assert_eq!(value(Some("t"), BOOL), Value::Bool(true));
        assert_eq!(value(None, INT4), Value::Null);
        assert_eq!(value(Some("NaN"), NUMERIC), Value::String("NaN".into()));
        assert_eq!(value(Some("{\"a\": [1]}"), JSONB), serde_json::json!({"a": [1]}));
        assert_eq!(value(Some("2024-01-01"), 1082), Value::String("2024-01-01".into()));
    }

    #[test]
    fn numeric_keeps_every_digit() {
        let v = value(Some("12345678901234567890.123456789"), NUMERIC);
        assert_eq!(v.to_string(), "12345678901234567890.123456789");
    }

    #[test]
    fn duplicate_names_get_suffixes() {
        let cols = vec![col("name", 25), col("name", 25), col("name_2", 25)];
        assert_eq!(keys(&cols), vec!["name", "name_2", "name_2_2"]);
        let row = vec![Some("a".into()), None, Some("c".into())];
        let o = row_object(&keys(&cols), &cols, &row);
        assert_eq!(o.to_string(), r#"{"name":"a","name_2":null,"name_2_2":"c"}"#);
    }
}
