//! Creating, migrating and checking the root's schema. `meta.schema_version` says which
//! version of the tables a root has; a circe refuses a root newer than it knows, and
//! `circe init` migrates an older one (all in one transaction, under an advisory lock so
//! two hosts initialising at once do not race).

use tokio_postgres::types::Type;

use super::conn::Conn;
use crate::error::{Error, Result};

/// The schema version this circe writes and reads.
pub const VERSION: u32 = 7;

/// The statements that bring a schema from version `i` to `i + 1` (index `i`; version 0 is
/// an empty schema).
const MIGRATIONS: [&str; 7] = [
    include_str!("schema.sql"),
    include_str!("schema_v2.sql"),
    include_str!("schema_v3.sql"),
    include_str!("schema_v4.sql"),
    include_str!("schema_v5.sql"),
    include_str!("schema_v6.sql"),
    include_str!("schema_v7.sql"),
];

/// The version this process makes and accepts: `VERSION`, or (TEST BUILDS ONLY,
/// `CIRCE_TEST_BREAK=pg-schema-v2`) version 2, as a circe without TX state does, so a test
/// can make an old root and migrate it.
pub(super) fn target() -> u32 {
    if crate::fault::test_break("pg-schema-v2") { 2 } else { VERSION }
}

/// Which clock decides leases: the database server's (`server`, the default), or each
/// client's (`client`: `CIRCE_NOW` works; for tests and fixtures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    Server,
    Client,
}

impl Clock {
    pub fn parse(s: &str) -> Option<Clock> {
        match s {
            "server" => Some(Clock::Server),
            "client" => Some(Clock::Client),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Clock::Server => "server",
            Clock::Client => "client",
        }
    }
}

/// `sql` with `{s}` the schema (a checked name) and `{channel}` its notification channel.
pub fn sql(schema: &str, text: &str) -> String {
    text.replace("{s}", &format!("\"{schema}\""))
        .replace("{channel}", &format!("'{}'", channel(schema)))
}

/// The LISTEN/NOTIFY channel of a root.
pub fn channel(schema: &str) -> String {
    format!("circe_{schema}")
}

/// The version of the tables in `schema` (0: none).
fn current(conn: &Conn, schema: &str) -> Result<u32> {
    let q = "SELECT to_regclass($1)::text";
    let meta = format!("\"{schema}\".meta");
    let row =
        conn.call("reading the schema", conn.client.query_typed_one(q, &[(&meta, Type::TEXT)]))?;
    if row.get::<_, Option<String>>(0).is_none() {
        return Ok(0);
    }
    let row = conn.call(
        "reading the schema version",
        conn.client.query_typed_opt(
            &sql(schema, "SELECT value FROM {s}.meta WHERE key = 'schema_version'"),
            &[],
        ),
    )?;
    version_of(row.map(|r| r.get::<_, String>(0)).as_deref(), schema)
}

/// The version `meta.schema_version` holds (`stored`; `None`: no such row), or the error of
/// a root whose version was changed by hand: neither an upgrade nor `init` can tell what
/// its tables are.
pub fn version_of(stored: Option<&str>, schema: &str) -> Result<u32> {
    let said = match stored {
        Some(v) => match v.parse() {
            Ok(n) => return Ok(n),
            Err(_) => format!("is `{}`, not a number", crate::error::one_line(v)),
        },
        None => "is missing".to_string(),
    };
    Err(Error::internal(format!(
        "the root in schema {schema} is damaged: its version (the `schema_version` row of {schema}.meta) {said}"
    ))
    .hint(format!(
        "put back the version its tables have (`UPDATE \"{schema}\".meta SET value = '{VERSION}' WHERE key = 'schema_version'` when this circe made or migrated them, then `circe doctor`), or restore the schema from a backup"
    )))
}

/// Refuse a schema of another version than this circe's (`location`: the root's URL with
/// its schema, for the hint; `None` within `init`, which migrates an older one).
pub fn check(version: u32, schema: &str, location: Option<&str>) -> Result<()> {
    let want = target();
    if version > want {
        return Err(Error::refused(format!(
            "the root in schema {schema} has schema version {version}; this circe knows up to {want}"
        ))
        .hint("upgrade circe on this host"));
    }
    if version < want {
        return Err(Error::refused(format!(
            "the root in schema {schema} has schema version {version}; this circe needs {want}"
        ))
        .hint(format!(
            "`circe --root '{}' init` migrates it (one transaction; no folder is written)",
            location.unwrap_or("URL")
        )));
    }
    Ok(())
}

/// The first statement of the first migration.
const MAKE_SCHEMA: &str = "CREATE SCHEMA IF NOT EXISTS {s};";

/// Make or migrate the schema; on a new one store `config` and the clock. Returns the
/// version found (0: the root was created; below `target()`: it was migrated). `clock`
/// given for a root that exists must be its own (refused before anything is changed).
pub fn init(conn: &Conn, schema: &str, config: &str, clock: Clock, given: bool) -> Result<u32> {
    let lock = format!("circe {schema}");
    conn.call("starting the schema transaction", conn.client.batch_execute("BEGIN"))?;
    let done = (|| -> Result<u32> {
        conn.call(
            "locking the schema",
            conn.client
                .query_typed("SELECT pg_advisory_xact_lock(hashtext($1))", &[(&lock, Type::TEXT)]),
        )?;
        let from = current(conn, schema)?;
        if from > 0 && given {
            let q = sql(schema, "SELECT value FROM {s}.meta WHERE key = 'clock'");
            let row = conn.call("reading the clock", conn.client.query_typed_opt(&q, &[]))?;
            let held = row.map_or_else(|| "server".into(), |r| r.get::<_, String>(0));
            if held != clock.as_str() {
                return Err(Error::refused(format!(
                    "the root in schema {schema} decides leases by the {held} clock; --clock {} applies only when a root is made",
                    clock.as_str()
                ))
                .hint("leave --clock out (nothing was changed), or make a new root in another schema"));
            }
        }
        let to = target();
        if from > to {
            check(from, schema, None)?;
        }
        // A schema made for circe's role beforehand (`CREATE SCHEMA s AUTHORIZATION role`)
        // is used as it is: `CREATE SCHEMA IF NOT EXISTS` asks for CREATE on the database
        // even when the schema exists.
        let made = from == 0
            && conn
                .call(
                    "looking for the schema",
                    conn.client.query_typed_opt(
                        "SELECT 1 FROM pg_namespace WHERE nspname = $1",
                        &[(&schema, Type::TEXT)],
                    ),
                )?
                .is_some();
        for m in MIGRATIONS.iter().take(to as usize).skip(from as usize) {
            let m = if made { m.replacen(MAKE_SCHEMA, "", 1) } else { (*m).to_string() };
            conn.call("creating the tables", conn.client.batch_execute(&sql(schema, &m)))?;
        }
        if from == 0 {
            let ins = sql(
                schema,
                "INSERT INTO {s}.meta VALUES ('schema_version', $1), ('clock', $2);
                 ",
            );
            let v = to.to_string();
            let c = clock.as_str().to_string();
            conn.call(
                "writing the schema version",
                conn.client.execute_typed(&ins, &[(&v, Type::TEXT), (&c, Type::TEXT)]),
            )?;
            conn.call(
                "writing the configuration",
                conn.client.execute_typed(
                    &sql(schema, "INSERT INTO {s}.config VALUES (1, $1)"),
                    &[(&config, Type::TEXT)],
                ),
            )?;
        } else if from < to {
            conn.call(
                "writing the schema version",
                conn.client.batch_execute(&sql(
                    schema,
                    &format!("UPDATE {{s}}.meta SET value = '{to}' WHERE key = 'schema_version'"),
                )),
            )?;
        }
        Ok(from)
    })();
    match done {
        Ok(from) => {
            conn.call("committing the schema", conn.client.batch_execute("COMMIT"))?;
            Ok(from)
        }
        Err(e) => {
            let _ = conn.run(conn.client.batch_execute("ROLLBACK"));
            Err(e)
        }
    }
}
