//! What generated SQL may be, decided before PostgreSQL's own parse tree is asked: the guard on
//! the text and the policy on the functions it calls.

pub mod guard;
pub mod policy;
pub mod refusal;
