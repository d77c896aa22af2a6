//! Reading many messages of one box in one statement (`Engine::read_messages_capped`): a
//! consumer that hands a message on judges its sender's other messages in the INBOX, and
//! `wait --for inbox`, `prime` and `board` judge the whole INBOX; one round trip each made
//! those reads grow with the INBOX.

use tokio_postgres::types::Type;

use super::PgEngine;
use crate::boxes::Mailbox;
use crate::engine::Capped;
use crate::error::{Error, Result};

/// How many bytes one statement brings at most (past its first message): the reads stay
/// this size in memory, however large the box.
const BUDGET: i64 = 1 << 20;

impl PgEngine {
    /// `Engine::read_messages_capped`: the files as one array, each statement bringing the
    /// next of them in order up to `BUDGET` bytes (its first always), with how many of
    /// them there are, so that the ones it did not bring are known to be missing or left
    /// for the next statement.
    pub(super) fn read_many(
        &self,
        mailbox: &Mailbox,
        files: &[String],
        cap: usize,
        each: &mut dyn FnMut(&str, Result<Capped>),
    ) -> Result<()> {
        self.forget_read_ahead();
        let b = mailbox.label();
        let take = i32::try_from(cap.saturating_add(1)).unwrap_or(i32::MAX);
        let missing = |f: &str| super::seam::no_message(f, mailbox);
        let mut rest = files;
        while !rest.is_empty() {
            let rows = self.rows(
                &format!("reading {} messages of {b}", rest.len()),
                "SELECT n, substring(body FROM 1 FOR $3), octet_length(body), present FROM (
                   SELECT f.n, m.body, count(*) OVER () AS present,
                          sum(least(octet_length(m.body), $3)) OVER (ORDER BY f.n) AS upto
                   FROM unnest($2::text[]) WITH ORDINALITY AS f(file, n)
                   JOIN {s}.messages m ON m.box = $1 AND m.file = f.file
                 ) r
                 WHERE upto - least(octet_length(body), $3) < $4
                 ORDER BY n",
                &[
                    (&b, Type::TEXT),
                    (&rest, Type::TEXT_ARRAY),
                    (&take, Type::INT4),
                    (&BUDGET, Type::INT8),
                ],
                |r| {
                    let (n, bytes, size, present) = (
                        r.get::<_, i64>(0),
                        r.get::<_, Vec<u8>>(1),
                        r.get::<_, i32>(2),
                        r.get::<_, i64>(3),
                    );
                    let n = usize::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
                        Error::internal(format!("reading {b}: the database answered file {n}"))
                    })?;
                    Ok((n, bytes, size, present))
                },
            )?;
            let all =
                rows.first().is_none_or(|r| usize::try_from(r.3).is_ok_and(|p| p == rows.len()));
            // Ordinals count from 1; every file before the last one brought is answered.
            let mut next = 1;
            for (n, bytes, size, _) in rows {
                for f in rest.get(next - 1..n - 1).unwrap_or_default() {
                    each(f, Err(missing(f)));
                }
                if let Some(f) = rest.get(n - 1) {
                    each(f, Ok(Capped { bytes, size: u64::try_from(size).ok() }));
                }
                next = n + 1;
            }
            if all {
                for f in rest.get(next - 1..).unwrap_or_default() {
                    each(f, Err(missing(f)));
                }
                break;
            }
            rest = rest.get(next - 1..).unwrap_or_default();
        }
        Ok(())
    }
}
