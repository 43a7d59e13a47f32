//! Typed errors of the pipeline and the SQLSTATE each one maps to.

use std::fmt;

/// The SQLSTATE codes nl2sql raises; names follow PostgreSQL's condition names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlState {
    InvalidParameterValue,
    ProgramLimitExceeded,
    ObjectNotInPrerequisiteState,
    UndefinedTable,
    UnableToEstablishConnection,
    ConnectionFailure,
    ProtocolViolation,
    InvalidAuthorization,
    ConfigurationLimitExceeded,
    QueryCanceled,
    SyntaxError,
    ReadOnlySqlTransaction,
    InsufficientPrivilege,
    FeatureNotSupported,
    InternalError,
    /// A SQLSTATE reported by PostgreSQL itself (five characters), passed through.
    Other([u8; 5]),
}

impl SqlState {
    pub fn code(&self) -> &str {
        match self {
            SqlState::InvalidParameterValue => "22023",
            SqlState::ProgramLimitExceeded => "54000",
            SqlState::ObjectNotInPrerequisiteState => "55000",
            SqlState::UndefinedTable => "42P01",
            SqlState::UnableToEstablishConnection => "08001",
            SqlState::ConnectionFailure => "08006",
            SqlState::ProtocolViolation => "08P01",
            SqlState::InvalidAuthorization => "28000",
            SqlState::ConfigurationLimitExceeded => "53400",
            SqlState::QueryCanceled => "57014",
            SqlState::SyntaxError => "42601",
            SqlState::ReadOnlySqlTransaction => "25006",
            SqlState::InsufficientPrivilege => "42501",
            SqlState::FeatureNotSupported => "0A000",
            SqlState::InternalError => "XX000",
            SqlState::Other(code) => std::str::from_utf8(code).unwrap_or("XX000"),
        }
    }

    /// Parses a five-character SQLSTATE; anything else becomes an internal error.
    pub fn from_code(code: &str) -> SqlState {
        let known = [
            SqlState::InvalidParameterValue,
            SqlState::ProgramLimitExceeded,
            SqlState::ObjectNotInPrerequisiteState,
            SqlState::UndefinedTable,
            SqlState::UnableToEstablishConnection,
            SqlState::ConnectionFailure,
            SqlState::ProtocolViolation,
            SqlState::InvalidAuthorization,
            SqlState::ConfigurationLimitExceeded,
            SqlState::QueryCanceled,
            SqlState::SyntaxError,
            SqlState::ReadOnlySqlTransaction,
            SqlState::InsufficientPrivilege,
            SqlState::FeatureNotSupported,
            SqlState::InternalError,
        ];
        if let Some(k) = known.iter().find(|k| k.code() == code) {
            return *k;
        }
        let bytes = code.as_bytes();
        if bytes.len() == 5 && bytes.iter().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()) {
            let mut c = [0u8; 5];
            c.copy_from_slice(bytes);
            SqlState::Other(c)
        } else {
            SqlState::InternalError
        }
    }
}

/// Packs a five-character SQLSTATE the way PostgreSQL's MAKE_SQLSTATE macro does.
pub fn pack_sqlstate(code: &str) -> i32 {
    code.bytes().take(5).enumerate().map(|(i, c)| ((c as i32 - b'0' as i32) & 0x3F) << (6 * i)).sum()
}

/// The five characters of a packed SQLSTATE.
pub fn unpack_sqlstate(code: i32) -> String {
    (0..5).map(|i| (((code >> (6 * i)) & 0x3F) as u8 + b'0') as char).collect()
}

/// What every error of the pipeline can say about itself, in PostgreSQL's terms.
pub trait Diagnostic {
    fn sqlstate(&self) -> SqlState;
    /// Lowercase, no final period.
    fn message(&self) -> String;
    fn detail(&self) -> Option<String> {
        None
    }
    fn hint(&self) -> Option<String> {
        None
    }
}

/// A finished diagnostic, detached from the error that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub sqlstate: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl Report {
    pub fn new(sqlstate: SqlState, message: impl Into<String>) -> Report {
        Report { sqlstate, message: message.into(), detail: None, hint: None }
    }
    pub fn detail(mut self, d: impl Into<String>) -> Report {
        self.detail = Some(d.into());
        self
    }
    pub fn hint(mut self, h: impl Into<String>) -> Report {
        self.hint = Some(h.into());
        self
    }
    pub fn from_diagnostic(d: &dyn Diagnostic) -> Report {
        Report { sqlstate: d.sqlstate(), message: d.message(), detail: d.detail(), hint: d.hint() }
    }
    /// Replaces every occurrence of `secret` in all texts, so no message can leak it.
    pub fn redact(mut self, secret: Option<&str>) -> Report {
        if let Some(s) = secret.filter(|s| s.len() >= 4) {
            let scrub = |t: &mut String| {
                if t.contains(s) {
                    *t = t.replace(s, "***");
                }
            };
            scrub(&mut self.message);
            if let Some(d) = self.detail.as_mut() {
                scrub(d);
            }
            if let Some(h) = self.hint.as_mut() {
                scrub(h);
            }
        }
        self
    }
}

impl Diagnostic for Report {
    fn sqlstate(&self) -> SqlState {
        self.sqlstate
    }
    fn message(&self) -> String {
        self.message.clone()
    }
    fn detail(&self) -> Option<String> {
        self.detail.clone()
    }
    fn hint(&self) -> Option<String> {
        self.hint.clone()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (SQLSTATE {})", self.message, self.sqlstate.code())
    }
}

/// A string that never shows itself in Debug or Display output.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "Secret(<empty>)" } else { "Secret(***)" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        assert_eq!(SqlState::from_code("08001"), SqlState::UnableToEstablishConnection);
        assert_eq!(SqlState::from_code("42703").code(), "42703");
        assert_eq!(SqlState::from_code("bogus"), SqlState::InternalError);
    }

    #[test]
    fn sqlstate_packing_round_trips() {
        for code in ["42601", "57014", "08P01", "XX000", "22023"] {
            assert_eq!(unpack_sqlstate(pack_sqlstate(code)), code);
        }
        // ERRCODE_SYNTAX_ERROR as PostgreSQL packs it.
        assert_eq!(pack_sqlstate("42601"), 4 + (2 << 6) + (6 << 12) + (0 << 18) + (1 << 24));
    }

    #[test]
    fn redact_scrubs_every_field() {
        let r = Report::new(SqlState::InvalidAuthorization, "bad key sk-123456")
            .detail("sent sk-123456")
            .hint("sk-123456 is wrong")
            .redact(Some("sk-123456"));
        assert!(!format!("{r:?}").contains("sk-123456"));
    }

    #[test]
    fn secret_hides_in_debug() {
        assert_eq!(format!("{:?}", Secret::new("abc")), "Secret(***)");
    }
}
