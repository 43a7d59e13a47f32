//! Open-SQL's variable-length schema: when the whole schema does not fit the budget in full, the
//! tables linked to the question keep their detail and the others keep their names.
//!
//! Steps, each tried only when the previous one does not fit:
//! 1. every table in full, example values truncated (one sample text, short values);
//! 2. the linked tables in full, every other table as one line of names;
//! 3. in the linked tables, only the linked columns, keys and join columns in full, the other
//!    columns as one line of names (target-column truncation);
//! 4. the least relevant name lines dropped;
//! 5. the linked tables' detail dropped to names and types, then linked tables themselves.

use super::{estimate_tokens, render_columns, render_table, token_units, write_foreign_keys, Column, Detail, Rendered, Schema, Table, TOKEN_UNITS};
use std::fmt::Write;

/// Which tables and columns a question links to, and how the other tables rank.
#[derive(Debug, Clone, Default)]
pub struct Linking {
    /// Linked columns, as (table index, column index): shown in full.
    pub columns: Vec<(usize, usize)>,
    /// Tables by relevance, best first (not necessarily linked); tables absent follow in schema
    /// order. Name lines are dropped from the end of this order.
    pub rank: Vec<usize>,
}

/// The header lines around the name lines (ASCII), in token units.
const NAMES_HEADER_UNITS: usize = "# All tables (names only):\n# Tables for this question:\n".len() * 5;

/// A table's name line, in token units (super::token_units).
pub(super) fn name_line_units(t: &Table) -> usize {
    let mut line = String::new();
    render_table(&mut line, t, Detail::Names);
    token_units(&line)
}

/// Token units that estimate_tokens() counts as at most `tokens` tokens.
fn units_within(tokens: usize) -> usize {
    tokens * TOKEN_UNITS
}

/// How many of `tables`, from the first, have name lines within `room` token units; None when
/// there is no room at all. Texts are priced in token units, as estimate_tokens() does.
fn fitting(tables: &[usize], cost: &[usize], room: Option<usize>) -> Option<usize> {
    let mut left = room?;
    let mut n = 0;
    for &t in tables {
        if cost[t] > left {
            break;
        }
        left -= cost[t];
        n += 1;
    }
    Some(n)
}

/// How a linked table is drawn.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// Every column in full, example values truncated.
    Whole,
    /// Linked columns, keys and join columns in full; the rest by name.
    Linked,
    /// Linked columns, keys and join columns with names and types only; the rest by name.
    Bare,
}

impl Schema {
    /// Open-SQL's variable-length rendering within `max_tokens` (see the module comment). The
    /// plain rendering when every table fits in full.
    pub fn render_linked(&self, max_tokens: usize, linking: &Linking) -> Rendered {
        // Each table's name line, costed once: the forms below are priced from these sums, and
        // rendered only when they fit (a thousand tables are not rendered a thousand ways).
        let name_cost: Vec<usize> = self.tables.iter().map(name_line_units).collect();
        let order = self.order(linking);
        let linked: Vec<usize> = order.iter().copied().filter(|t| linking.columns.iter().any(|c| c.0 == *t)).collect();
        let others: Vec<usize> = order.iter().copied().filter(|t| !linked.contains(t)).collect();
        // Every full form is longer than the name lines of every table.
        if name_cost.iter().sum::<usize>() <= units_within(max_tokens) {
            let full = self.render_tables(&self.tables, Detail::Full, 0);
            let all: Vec<usize> = (0..self.tables.len()).collect();
            if estimate_tokens(&full) <= max_tokens {
                return self.rendered(full, Detail::Full, &all, &[]);
            }
            // 1. Everything in full with short example values.
            let text = self.variable(&all, Form::Whole, &[], linking, 0);
            if estimate_tokens(&text) <= max_tokens {
                return self.rendered(text, Detail::Full, &all, &[]);
            }
        }
        let names_of = |tables: &[usize]| tables.iter().map(|&t| name_cost[t]).sum::<usize>() + NAMES_HEADER_UNITS;
        if !linked.is_empty() {
            // 2–3. Every table's name line in schema order (the same for every question), then
            // the linked tables whole, else their linked columns only.
            let all: Vec<usize> = (0..self.tables.len()).collect();
            for form in [Form::Whole, Form::Linked] {
                let detailed = token_units(&self.variable(&linked, form, &[], linking, 0));
                if detailed + names_of(&all) <= units_within(max_tokens) {
                    let text = self.variable(&linked, form, &all, linking, 0);
                    return self.rendered(text, Detail::Full, &linked, &all);
                }
            }
            // 4. As many name lines as fit, best first; then the linked columns bare.
            for form in [Form::Linked, Form::Bare] {
                let detailed = token_units(&self.variable(&linked, form, &[], linking, others.len()));
                if let Some(n) = fitting(&others, &name_cost, units_within(max_tokens).checked_sub(detailed + NAMES_HEADER_UNITS)) {
                    let text = self.variable(&linked, form, &others[..n], linking, others.len() - n);
                    let detail = if form == Form::Bare { Detail::Bare } else { Detail::Full };
                    return self.rendered(text, detail, &linked, &others[..n]);
                }
            }
        }
        // 5. Names only, best first, as many tables as fit (at least one).
        let note = token_units(&self.variable(&[], Form::Bare, &[], linking, order.len()));
        let shown = fitting(&order, &name_cost, units_within(max_tokens).checked_sub(note + NAMES_HEADER_UNITS)).unwrap_or(0).max(1);
        let text = self.variable(&[], Form::Bare, &order[..shown], linking, order.len() - shown);
        self.rendered(text, Detail::Names, &[], &order[..shown])
    }

    /// Every table once: ranked ones first, then the rest in schema order.
    fn order(&self, linking: &Linking) -> Vec<usize> {
        let mut seen = vec![false; self.tables.len()];
        let mut order = Vec::with_capacity(self.tables.len());
        let linked = linking.columns.iter().map(|c| c.0);
        for t in linked.chain(linking.rank.iter().copied()).chain(0..self.tables.len()) {
            if t < seen.len() && !seen[t] {
                seen[t] = true;
                order.push(t);
            }
        }
        order
    }

    /// The variable-length text: `detailed` tables in `form` (in schema order), then the
    /// `named` tables as name lines, the foreign keys among the detailed tables, and a note of
    /// the `omitted` tables.
    fn variable(&self, detailed: &[usize], form: Form, named: &[usize], linking: &Linking, omitted: usize) -> String {
        let mut out = String::new();
        let mut sorted = detailed.to_vec();
        sorted.sort_unstable();
        let fks = self.foreign_keys_among(sorted.iter().map(|&t| &self.tables[t]));
        // The name lines first: when every table has one they are the same for every question
        // (schema order), a prefix a model server's cache keeps.
        if !named.is_empty() {
            out.push_str(if named.len() == self.tables.len() { "# All tables (names only):\n" } else { "# Tables (names only):\n" });
            for &t in named {
                render_table(&mut out, &self.tables[t], Detail::Names);
            }
        }
        if omitted > 0 {
            let _ = writeln!(out, "# ... {omitted} more tables not shown (schema larger than the prompt budget)");
        }
        if !sorted.is_empty() && !named.is_empty() {
            out.push_str("# Tables for this question:\n");
        }
        for &t in &sorted {
            let table = &self.tables[t];
            let keep = |c: &Column| {
                form == Form::Whole
                    || linking.columns.iter().any(|&(lt, lc)| lt == t && table.columns[lc].name == c.name)
                    || table.primary_key.contains(&c.name)
                    || fks.iter().any(|fk| {
                        (fk.table == table.ident && fk.columns.contains(&c.ident))
                            || (fk.ref_table == table.ident && fk.ref_columns.contains(&c.ident))
                    })
            };
            let detail = if form == Form::Bare { Detail::Bare } else { Detail::Full };
            render_columns(&mut out, table, detail, true, keep);
        }
        write_foreign_keys(&mut out, &fks);
        out
    }

    fn rendered(&self, text: String, detail: Detail, detailed: &[usize], named: &[usize]) -> Rendered {
        let mut tables: Vec<usize> = detailed.iter().chain(named).copied().collect();
        tables.sort_unstable();
        tables.dedup();
        let shown = tables.len();
        let mut columns = Vec::new();
        for &t in &tables {
            let table = &self.tables[t];
            columns.extend(table.columns.iter().map(|c| format!("{}.{}", table.ident, c.ident)));
        }
        let tokens = estimate_tokens(&text);
        let mut detailed = detailed.to_vec();
        detailed.sort_unstable();
        Rendered { text, tokens, detail, tables_shown: shown, tables_omitted: self.tables.len() - shown, columns, detailed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::sample_schema;
    use crate::schema::{ColumnStats, ForeignKey};

    /// A schema of `n` tables of `cols` columns, each with a long comment and samples.
    fn wide(n: usize, cols: usize) -> Schema {
        let mut s = Schema::default();
        for t in 0..n {
            let columns = (0..cols)
                .map(|c| Column {
                    name: format!("col_{c}"),
                    ident: format!("col_{c}"),
                    data_type: "text".into(),
                    category: "S".into(),
                    comment: Some(format!("what column {c} of table {t} holds, said at some length")),
                    not_null: false,
                    enum_values: vec![],
                    stats: Some(ColumnStats {
                        values: vec!["a rather long sample value here".into(), "another one".into(), "third".into()],
                        distinct: 50,
                        ..Default::default()
                    }),
                })
                .collect();
            s.tables.push(Table {
                oid: t as u32 + 1,
                schema: "public".into(),
                name: format!("table_{t}"),
                ident: format!("table_{t}"),
                kind: "r".into(),
                comment: None,
                row_estimate: None,
                changes: None,
                columns,
                primary_key: vec!["col_0".into()],
                key_inferred: false,
                owner_trusted: true,
            });
        }
        s.foreign_keys.push(ForeignKey {
            table: "table_7".into(),
            columns: vec!["col_3".into()],
            ref_table: "table_2".into(),
            ref_columns: vec!["col_0".into()],
            inferred: false,
            enforced: true,
        });
        s
    }

    #[test]
    fn fits_whole_when_it_can() {
        let s = sample_schema();
        let r = s.render_linked(100_000, &Linking::default());
        assert_eq!(r.text, s.render(100_000).text);
        assert_eq!(r.tables_omitted, 0);
    }

    #[test]
    fn linked_tables_keep_detail_others_keep_names() {
        let s = wide(60, 12);
        let linking = Linking { columns: vec![(7, 5), (2, 1)], rank: vec![30, 31] };
        let r = s.render_linked(2500, &linking);
        assert!(r.tokens <= 2500, "{} tokens", r.tokens);
        // Linked columns in full, with their comments.
        assert!(r.text.contains("#   col_5: text, (what column 5 of table 7"), "{}", r.text);
        assert!(r.text.contains("#   col_1: text, (what column 1 of table 2"));
        // Every table keeps at least its name line.
        assert_eq!(r.tables_omitted, 0, "{}", r.text);
        assert!(r.text.contains("# table_30(col_0, col_1"));
        // Ranked tables come first among the name lines.
        // Every name line, in schema order, before the detail: the same prefix for any question.
        assert!(r.text.starts_with("# All tables (names only):\n# table_0(col_0,"), "{}", &r.text[..200]);
        let other = s.render_linked(2500, &Linking { columns: vec![(40, 2)], rank: vec![] });
        let prefix = |t: &str| t.split("# Tables for this question:\n").next().unwrap_or_default().to_string();
        assert_eq!(prefix(&r.text), prefix(&other.text));
        assert!(r.text.contains("# Tables for this question:\n# table_2 ("));
        // The foreign key between the two linked tables is kept, and its column shown.
        assert!(r.text.contains("# table_7.col_3 = table_2.col_0"));
        assert!(r.text.contains("#   col_3: text"));
        assert_eq!(r.columns.len(), 60 * 12);
    }

    #[test]
    fn target_columns_then_names_are_cut_to_fit() {
        let s = wide(1000, 40);
        let linking = Linking { columns: vec![(500, 39)], rank: vec![900] };
        let r = s.render_linked(4000, &linking);
        assert!(r.tokens <= 4000, "{} tokens", r.tokens);
        assert!(r.text.contains("# table_500 (") && r.text.contains("#   col_39: text, ("));
        // Target-column truncation: the unlinked columns of the linked table by name.
        assert!(r.text.contains("#   other columns: col_1, col_2"), "{}", &r.text[..600]);
        assert!(r.tables_omitted > 0 && r.text.contains("more tables not shown"));
        // The ranked table keeps its name line before tables in schema order.
        assert!(r.text.contains("# table_900(col_0"));
        assert!(r.columns.iter().any(|c| c == "table_900.col_0"));
        assert!(!r.columns.iter().any(|c| c == "table_999.col_0"));
    }

    #[test]
    fn nothing_linked_names_by_rank() {
        let s = wide(1000, 40);
        let r = s.render_linked(3000, &Linking { columns: vec![], rank: vec![999, 998] });
        assert!(r.tokens <= 3000);
        assert!(r.text.starts_with("# Tables (names only):\n# table_999(col_0"), "{}", &r.text[..200]);
        assert_eq!(r.detail, Detail::Names);
    }

    #[test]
    fn tiny_budget_keeps_one_table() {
        let s = wide(10, 40);
        let r = s.render_linked(10, &Linking { columns: vec![(3, 1)], rank: vec![] });
        assert_eq!(r.tables_shown, 1);
        assert!(r.text.contains("table_3"));
    }
}
