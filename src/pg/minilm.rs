//! The in-database sentence model (nl2sql.column_embedder = minilm): all-MiniLM-L6-v2, loaded
//! once per backend on first use from the share directory, its weights mapped read-only so that
//! backends share one copy in the page cache.

use crate::pg::errors;
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::retrieval::minilm::{self, Model};
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::CStr;
use std::path::PathBuf;
use std::rc::Rc;

thread_local! {
    // Loaded on first use; a failed load is not kept (the files may be installed meanwhile).
    static MODEL: RefCell<Option<Rc<Model>>> = const { RefCell::new(None) };
}

/// `<sharedir>/extension/nl2sql/all-MiniLM-L6-v2`, where scripts/setup.sh puts the files.
pub fn directory() -> PathBuf {
    let mut buf = [0 as std::ffi::c_char; pg_sys::MAXPGPATH as usize];
    // SAFETY: my_exec_path is the server's own NUL-terminated path; get_share_path writes at
    // most MAXPGPATH bytes, NUL-terminated, into buf.
    let share = unsafe {
        pg_sys::get_share_path(std::ptr::addr_of!(pg_sys::my_exec_path).cast(), buf.as_mut_ptr());
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    };
    PathBuf::from(share).join("extension").join("nl2sql").join(minilm::ID)
}

/// The model, loaded on first use; 58P01 when its files are missing or unreadable (the
/// server's paths in the detail for superusers only).
fn model() -> Result<Rc<Model>, Report> {
    if let Some(m) = MODEL.with_borrow(|m| m.clone()) {
        return Ok(m);
    }
    let dir = directory();
    match Model::load(&dir) {
        Ok(m) => {
            let m = Rc::new(m);
            MODEL.with_borrow_mut(|slot| *slot = Some(m.clone()));
            Ok(m)
        }
        Err(e) => {
            let r = Report::new(SqlState::Other(*b"58P01"), format!("could not load the sentence model {}", minilm::ID))
                .hint("scripts/setup.sh installs its files; until then a superuser can SET nl2sql.column_embedder = values.");
            // The role that called, not the one nl2sql acts as (a refresh embeds as the
            // extension's owner). SAFETY: reads a role's catalog entry; a backend is running.
            let superuser = unsafe { pg_sys::superuser_arg(pg_sys::GetOuterUserId()) };
            Err(if superuser { r.detail(format!("{}: {e}", dir.display())) } else { r })
        }
    }
}

/// Like embed, with the model's load failure returned instead of raised.
pub fn try_embed(texts: &[String]) -> Result<Vec<Vec<f32>>, Report> {
    if texts.is_empty() {
        return Ok(vec![]);
    }
    model()?;
    Ok(embed(texts))
}

/// Unit vectors of `texts` (384 dimensions), cancel honoured between texts and layers.
pub fn embed(texts: &[String]) -> Vec<Vec<f32>> {
    if texts.is_empty() {
        return vec![];
    }
    let m = model().unwrap_or_else(|r| errors::raise(&r));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut out = Vec::with_capacity(texts.len());
    // Chunks: progress for long runs (a schema of 30,000 columns takes minutes).
    let chunk = 256;
    for (i, part) in refs.chunks(chunk).enumerate() {
        out.extend(m.embed(part, &mut || {
            check_for_interrupts!();
        }));
        if texts.len() > 4 * chunk && (i + 1) % 8 == 0 {
            note!("nl2sql: {} of {} column descriptions embedded", out.len(), texts.len());
        }
    }
    out
}
