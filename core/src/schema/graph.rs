//! The foreign-key graph of a schema (declared keys, and inferred ones where they are used):
//! its units (schemas, and tables no key links), join paths, and the per-question focus.

use super::Schema;
use crate::render::ident;
use serde::Serialize;

/// Undirected foreign-key graph of `schema`'s tables: (neighbour, foreign key) per table.
type FkGraph = Vec<Vec<(usize, usize)>>;

/// Breadth-first search from `sources` until `target`: each reached table's predecessor and the
/// foreign key that reached it.
fn breadth_first(graph: &FkGraph, sources: &[usize], target: usize) -> Vec<Option<(usize, usize)>> {
    let mut prev: Vec<Option<(usize, usize)>> = vec![None; graph.len()];
    let mut seen = vec![false; graph.len()];
    let mut queue: std::collections::VecDeque<usize> = sources.iter().copied().collect();
    for &t in sources {
        seen[t] = true;
    }
    let mut step = 0usize;
    while let Some(u) = queue.pop_front() {
        step += 1;
        crate::interrupt::every(step, 1024);
        if u == target {
            break;
        }
        for &(v, fk) in &graph[u] {
            if !seen[v] {
                seen[v] = true;
                prev[v] = Some((u, fk));
                queue.push_back(v);
            }
        }
    }
    prev
}

impl Schema {
    fn fk_graph(&self) -> FkGraph {
        // One pass over the tables, not one per foreign key: a schema may hold tens of thousands.
        let by_ident: std::collections::HashMap<&str, usize> =
            self.tables.iter().enumerate().map(|(i, t)| (t.ident.as_str(), i)).rev().collect();
        let index = |ident: &str| by_ident.get(ident).copied();
        let mut graph: FkGraph = vec![vec![]; self.tables.len()];
        for (fi, fk) in self.foreign_keys.iter().enumerate() {
            if let (Some(a), Some(b)) = (index(&fk.table), index(&fk.ref_table)) {
                // No join path runs through (or to) a stranger's table: her keys are hers.
                if self.tables[a].is_strangers() || self.tables[b].is_strangers() {
                    continue;
                }
                graph[a].push((b, fi));
                graph[b].push((a, fi));
            }
        }
        graph
    }

    /// Whether a foreign key (of any width) links the tables `a` and `b` (idents), either way
    /// round.
    pub fn tables_linked(&self, a: &str, b: &str) -> bool {
        self.foreign_keys.iter().any(|fk| (fk.table == a && fk.ref_table == b) || (fk.table == b && fk.ref_table == a))
    }

    /// The units a question's tables come from, one number per table: the tables of one schema
    /// are one unit, and so are tables a foreign key links (across schemas too). A database
    /// with one schema is one unit; ten databases merged, a schema each, are ten.
    pub fn units(&self) -> Vec<usize> {
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let mut parent: Vec<usize> = (0..self.tables.len()).collect();
        let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
            let (ra, rb) = (root(parent, a), root(parent, b));
            if ra != rb {
                parent[ra.max(rb)] = ra.min(rb);
            }
        };
        let mut first_of_schema: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (i, t) in self.tables.iter().enumerate() {
            crate::interrupt::every(i, 1024);
            let first = *first_of_schema.entry(t.schema.as_str()).or_insert(i);
            union(&mut parent, first, i);
        }
        for (i, edges) in self.fk_graph().iter().enumerate() {
            for &(j, _) in edges {
                union(&mut parent, i, j);
            }
        }
        (0..self.tables.len()).map(|i| root(&mut parent, i)).collect()
    }

    /// The shortest chain of foreign keys joining table `from` to table `to` (Interactive-T2S's
    /// FindShortestPath on the table graph), as join conditions in order from `from`:
    /// `a.x = b.y` (names rendered: they are their owners' text); empty for one table, None when
    /// no chain joins them.
    pub fn join_path(&self, from: usize, to: usize) -> Option<Vec<String>> {
        if from >= self.tables.len() || to >= self.tables.len() {
            return None;
        }
        let prev = breadth_first(&self.fk_graph(), &[to], from);
        let mut steps = Vec::new();
        let mut at = from;
        while at != to {
            let (next, fi) = prev[at]?;
            let fk = &self.foreign_keys[fi];
            let pairs: Vec<String> = fk
                .columns
                .iter()
                .zip(&fk.ref_columns)
                .map(|(c, r)| {
                    let (t, c, rt, r) = (ident(&fk.table), ident(c), ident(&fk.ref_table), ident(r));
                    format!("{t}.{c} = {rt}.{r}")
                })
                .collect();
            steps.push(pairs.join(" AND "));
            at = next;
        }
        Some(steps)
    }
}

/// The per-question schema and how it was grown from the chosen columns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Focus {
    #[serde(skip)]
    pub schema: Schema,
    /// Tables added to join the chosen ones (the foreign-key path).
    pub path_tables: Vec<String>,
    /// Columns added: primary keys, join columns, columns sharing a name with a chosen one.
    pub added_columns: Vec<String>,
}

impl Schema {
    /// The per-question schema: the tables of the chosen columns and the shortest foreign-key
    /// paths joining them; in each, the chosen columns, primary keys, join columns and columns
    /// that share a name with a chosen one. Nothing chosen: the whole schema.
    pub fn focus(&self, chosen: &[(usize, usize)]) -> Focus {
        if chosen.is_empty() {
            return Focus { schema: self.clone(), ..Default::default() };
        }
        let graph = self.fk_graph();
        let mut wanted: Vec<usize> = Vec::new();
        for &(t, _) in chosen {
            if !wanted.contains(&t) {
                wanted.push(t);
            }
        }
        // Grow a tree from the first chosen table: join each other chosen table to it by a
        // shortest path (breadth-first from the whole tree). Unreachable tables stay apart.
        let mut tables: Vec<usize> = vec![wanted[0]];
        let mut used_fks: Vec<usize> = Vec::new();
        for &target in wanted.iter().skip(1) {
            if tables.contains(&target) {
                continue;
            }
            let prev = breadth_first(&graph, &tables, target);
            tables.push(target);
            let mut at = target;
            while let Some((u, fk)) = prev[at] {
                used_fks.push(fk);
                if tables.contains(&u) {
                    break;
                }
                tables.push(u);
                at = u;
            }
        }
        let chosen_names: Vec<&str> = chosen.iter().map(|&(t, c)| self.tables[t].columns[c].name.as_str()).collect();
        let mut focus = Focus::default();
        let mut out = Schema { strangers_left_out: self.strangers(), ..Schema::default() };
        for (ti, t) in self.tables.iter().enumerate() {
            if !tables.contains(&ti) {
                continue;
            }
            if !wanted.contains(&ti) {
                // Trace names: a table owner's line breaks and invisible characters escaped.
                focus.path_tables.push(crate::render::visible(&t.ident, false));
            }
            let join_cols: Vec<&str> = used_fks
                .iter()
                .map(|&fi| &self.foreign_keys[fi])
                .flat_map(|fk| {
                    let mut cols: Vec<&str> = Vec::new();
                    if fk.table == t.ident {
                        cols.extend(fk.columns.iter().map(String::as_str));
                    }
                    if fk.ref_table == t.ident {
                        cols.extend(fk.ref_columns.iter().map(String::as_str));
                    }
                    cols
                })
                .collect();
            let mut table = t.clone();
            table.columns = t
                .columns
                .iter()
                .enumerate()
                .filter(|(ci, c)| {
                    let picked = chosen.contains(&(ti, *ci));
                    let keep = picked
                        || t.primary_key.contains(&c.name)
                        || join_cols.contains(&c.ident.as_str())
                        || chosen_names.contains(&c.name.as_str());
                    if keep && !picked {
                        focus.added_columns.push(crate::render::visible(&format!("{}.{}", t.ident, c.ident), false));
                    }
                    keep
                })
                .map(|(_, c)| c.clone())
                .collect();
            out.tables.push(table);
        }
        let shown = |ident: &str, cols: &[String]| {
            out.tables.iter().find(|t| t.ident == ident).is_some_and(|t| cols.iter().all(|c| t.columns.iter().any(|x| &x.ident == c)))
        };
        out.foreign_keys = self
            .foreign_keys
            .iter()
            .filter(|fk| shown(&fk.table, &fk.columns) && shown(&fk.ref_table, &fk.ref_columns))
            .cloned()
            .collect();
        focus.schema = out;
        focus
    }
}
