//! Statements a long-lived connection sends again and again (the pick of `claim --next`,
//! a task's load), prepared on the server once per connection, so the server parses and
//! plans each once rather than on every change.
//!
//! Only on a warm connection (one that committed a change already: a library claimer, a
//! follower, a command working through many tasks): a fresh CLI process sends each once,
//! and a prepare would cost it a statement more. The name is the statement's text hashed
//! (`circe_` and 16 hex digits), so a name means one text wherever it is found: behind a
//! transaction pooler, where the next transaction may run in another server session, a
//! session that has the name has the same statement, and one that lacks it answers
//! "does not exist" (or has it already, and refuses the `PREPARE`); the engine then stops
//! preparing on that connection and sends the text again as it is. The `PREPARE` goes
//! after the `BEGIN`, in the same round trip: a prepared statement outlives a rollback,
//! and a round trip goes on past no transaction's end (`conn.rs`).

use std::cell::{Cell, RefCell};
use std::collections::HashSet;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

pub(super) struct Prepared {
    /// The names prepared on this connection.
    names: RefCell<HashSet<String>>,
    /// Nothing is prepared on this connection: the URL names a pooler (`listen_port=`), or
    /// a prepared statement was not found (a pooler the URL does not name).
    off: Cell<bool>,
}

/// A bound parameter and its type.
pub(super) type Param<'p> = (&'p (dyn tokio_postgres::types::ToSql + Sync), Type);

/// What to send for one statement: the `PREPARE` to send before it (its first use on the
/// connection), and the text to send, with its parameters (`bound`) or with their values
/// written into it (`EXECUTE` takes no bound parameters).
pub(super) struct Statement {
    pub prepare: Option<String>,
    pub text: String,
    pub bound: bool,
}

/// One parameter's value, for `EXECUTE`.
pub(super) enum Lit<'a> {
    Text(Option<&'a str>),
    Texts(&'a [String]),
}

impl Prepared {
    /// For a connection to the server itself (`direct`), or to a pooler.
    pub fn new(direct: bool) -> Prepared {
        Prepared { names: RefCell::default(), off: Cell::new(!direct) }
    }

    /// What to send for `sql`, whose parameters have `types` and the values `args`: the
    /// text itself on a cold connection (`warm` false) or one found pooled, else `EXECUTE`
    /// of its prepared form.
    pub fn text(&self, warm: bool, sql: &str, types: &[Type], args: &[Lit<'_>]) -> Statement {
        if !warm || self.off.get() {
            return Statement { prepare: None, text: sql.to_string(), bound: true };
        }
        let name = format!("circe_{:016x}", fnv1a(sql.as_bytes()));
        let text = if args.is_empty() {
            format!("EXECUTE {name}")
        } else {
            let args = args.iter().map(Lit::sql).collect::<Vec<_>>().join(", ");
            format!("EXECUTE {name}({args})")
        };
        let prepare = self.names.borrow_mut().insert(name.clone()).then(|| {
            let kinds = types.iter().map(Type::name).collect::<Vec<_>>().join(", ");
            if types.is_empty() {
                format!("PREPARE {name} AS {sql}")
            } else {
                format!("PREPARE {name} ({kinds}) AS {sql}")
            }
        });
        Statement { prepare, text, bound: false }
    }

    /// `e` says a prepared statement was not there: stop preparing on this connection
    /// (true: the caller sends the statement again as text).
    pub fn missing(&self, e: &tokio_postgres::Error) -> bool {
        let missing =
            e.as_db_error().is_some_and(|d| *d.code() == SqlState::INVALID_SQL_STATEMENT_NAME);
        if missing {
            self.give_up();
        }
        missing
    }

    /// Prepare nothing more on this connection.
    pub fn give_up(&self) {
        self.off.set(true);
        self.names.borrow_mut().clear();
    }
}

impl Statement {
    /// `query_typed_one` of this text, with `params` when they are bound.
    pub async fn query_one(
        &self,
        c: &tokio_postgres::Client,
        params: &[Param<'_>],
    ) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
        c.query_typed_one(&self.text, if self.bound { params } else { &[] }).await
    }
}

impl Lit<'_> {
    /// The value as SQL: an escape string (`E'...'`, read the same whatever
    /// `standard_conforming_strings` is) that takes the type `PREPARE` declared; a null and
    /// an array say their type.
    fn sql(&self) -> String {
        match self {
            Lit::Text(None) => "NULL::text".to_string(),
            Lit::Text(Some(s)) => quote(s),
            Lit::Texts(v) => {
                format!(
                    "ARRAY[{}]::text[]",
                    v.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")
                )
            }
        }
    }
}

fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 4);
    q.push_str("E'");
    for c in s.chars() {
        match c {
            '\\' => q.push_str("\\\\"),
            '\'' => q.push_str("\\'"),
            c => q.push(c),
        }
    }
    q.push('\'');
    q
}

/// FNV-1a, 64 bits: a name that stays the same across builds and versions of circe.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Send `prepare` (if any) as its own statement.
pub(super) async fn send_prepare(
    client: &tokio_postgres::Client,
    prepare: Option<&str>,
) -> std::result::Result<(), tokio_postgres::Error> {
    match prepare {
        Some(p) => client.batch_execute(p).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cold_or_pooled_connection_sends_the_text() {
        let args = [Lit::Text(Some("a"))];
        for (p, warm) in [(Prepared::new(true), false), (Prepared::new(false), true)] {
            let t = p.text(warm, "SELECT $1", &[Type::TEXT], &args);
            assert_eq!((t.prepare, t.text.as_str(), t.bound), (None, "SELECT $1", true));
        }
    }

    #[test]
    fn a_warm_connection_prepares_once_then_executes_with_the_values_written_in() {
        let p = Prepared::new(true);
        let sql = "SELECT $1, $2, $3";
        let list = ["x".to_string(), "it's \\ ".to_string()];
        let args = [Lit::Text(Some("w1")), Lit::Texts(&list), Lit::Text(None)];
        let types = [Type::TEXT, Type::TEXT_ARRAY, Type::TEXT];
        let first = p.text(true, sql, &types, &args);
        let name = format!("circe_{:016x}", fnv1a(sql.as_bytes()));
        assert_eq!(
            first.text,
            format!("EXECUTE {name}(E'w1', ARRAY[E'x', E'it\\'s \\\\ ']::text[], NULL::text)")
        );
        assert!(!first.bound);
        assert_eq!(first.prepare, Some(format!("PREPARE {name} (text, _text, text) AS {sql}")));
        let again = p.text(true, sql, &types, &args);
        assert_eq!((again.prepare, again.text), (None, first.text));
        // Once a prepared statement was missing, the text again.
        p.off.set(true);
        assert_eq!(p.text(true, sql, &types, &args).text, sql);
    }

    #[test]
    fn the_name_is_the_texts_hash() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
