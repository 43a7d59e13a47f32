//! The value index (which columns, how they are indexed and searched) and relationship profiling.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::time::Duration;

settings! {
    USE_VALUES: bool = true,
        c"nl2sql.use_values", Userset, GucFlags::default(),
        c"Whether nl2sql() shows the model stored values similar to words of the question.",
        c"Needs value indexes (nl2sql.create_value_index). Off: the ablation without value retrieval.";
    VALUE_THRESHOLD: real = 0.65,
        c"nl2sql.value_threshold", Userset, GucFlags::default(),
        c"Lowest similarity (0 to 1) of a retrieved value.",
        c"",
        range(0.0, 1.0);
    VALUE_TOP_K: int = 5,
        c"nl2sql.value_top_k", Userset, GucFlags::default(),
        c"Retrieved values shown to the model.",
        c"",
        range(0, 100);
    INDEX_MAX_VALUE_LENGTH: int = 200,
        c"nl2sql.index_max_value_length", Userset, GucFlags::default(),
        c"Longer values are not indexed (their phrases still are not either).",
        c"",
        range(1, 10_000);
    INDEX_MAX_AVG_LENGTH: int = 80,
        c"nl2sql.index_max_avg_length", Userset, GucFlags::default(),
        c"Columns whose values average more characters are free text and not indexed.",
        c"",
        range(1, 10_000);
    INDEX_MAX_DISTINCT: int = 2_000_000,
        c"nl2sql.index_max_distinct", Userset, GucFlags::default(),
        c"Columns with more distinct values are not indexed.",
        c"",
        range(1, i32::MAX);
    INDEX_HNSW_M: int = 4,
        c"nl2sql.index_hnsw_m", Userset, GucFlags::default(),
        c"HNSW m of value indexes built from now on.",
        c"",
        range(2, 100);
    INDEX_HNSW_EF_CONSTRUCTION: int = 8,
        c"nl2sql.index_hnsw_ef_construction", Userset, GucFlags::default(),
        c"HNSW ef_construction of value indexes built from now on.",
        c"",
        range(4, 1000);
    INDEX_BUILD_MEMORY_MB: int = 1024,
        c"nl2sql.index_build_memory", Userset, GucFlags::UNIT_MB,
        c"maintenance_work_mem used while building a value index, when larger than the current one.",
        c"",
        range(1, 1_048_576);
    SEARCH_EF: int = 40,
        c"nl2sql.search_ef", Userset, GucFlags::default(),
        c"hnsw.ef_search used by value and column search.",
        c"",
        range(1, 1000);
    PROFILE_ROWS: int = 10_000,
        c"nl2sql.profile_rows", Userset, GucFlags::default(),
        c"Rows nl2sql.profile_relationships() reads of each table (a block sample of a larger one).",
        c"",
        range(100, 10_000_000);
    PROFILE_TIMEOUT_MS: int = 10_000,
        c"nl2sql.profile_timeout", Userset, GucFlags::UNIT_MS,
        c"Time allowed for each read profiling makes of a table.",
        c"A table or a check that takes longer is left out, with a NOTICE.",
        range(100, 3_600_000);
    REFRESH_TABLE_TIMEOUT_MS: int = 0,
        c"nl2sql.refresh_table_timeout", Userset, GucFlags::UNIT_MS,
        c"Time allowed for all of each table's rebuilds and re-reads together in nl2sql.refresh_value_indexes().",
        c"A table that takes longer is skipped with a WARNING and keeps serving its previous generation; 0: no limit.",
        range(0, i32::MAX);
    USE_INFERRED_RELATIONSHIPS: bool = true,
        c"nl2sql.use_inferred_relationships", Userset, GucFlags::default(),
        c"Whether keys and relationships profiling inferred are used like declared ones.",
        c"Relationships a DBA confirmed are used either way; off: the ablation without inference.";
}

pub fn use_values() -> bool {
    USE_VALUES.get()
}

pub fn value_threshold() -> f32 {
    VALUE_THRESHOLD.get() as f32
}

pub fn value_top_k() -> usize {
    VALUE_TOP_K.get().max(0) as usize
}

pub fn index_max_value_length() -> i32 {
    INDEX_MAX_VALUE_LENGTH.get()
}

pub fn index_max_avg_length() -> i32 {
    INDEX_MAX_AVG_LENGTH.get()
}

pub fn index_max_distinct() -> i64 {
    INDEX_MAX_DISTINCT.get() as i64
}

pub fn index_hnsw_m() -> i32 {
    INDEX_HNSW_M.get()
}

pub fn index_hnsw_ef_construction() -> i32 {
    INDEX_HNSW_EF_CONSTRUCTION.get().max(2 * INDEX_HNSW_M.get())
}

pub fn index_build_memory_mb() -> i32 {
    INDEX_BUILD_MEMORY_MB.get()
}

pub fn search_ef() -> i32 {
    SEARCH_EF.get()
}

pub fn profile_rows() -> i32 {
    PROFILE_ROWS.get().max(100)
}

pub fn profile_timeout() -> Duration {
    Duration::from_millis(PROFILE_TIMEOUT_MS.get().max(1) as u64)
}

/// None: no limit (0).
pub fn refresh_table_timeout() -> Option<Duration> {
    let ms = REFRESH_TABLE_TIMEOUT_MS.get();
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

pub fn use_inferred_relationships() -> bool {
    USE_INFERRED_RELATIONSHIPS.get()
}
