//! What generated SQL may be, decided before PostgreSQL's own parse tree is asked: the guard on
//! the text and the policy on the functions it calls; and which statements of a table owner's
//! read by name are the read's own.

pub mod guard;
pub mod names;
pub mod policy;
pub mod refusal;
pub mod unicode;
