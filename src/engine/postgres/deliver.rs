//! Delivering messages: every copy of one message, of a batch (a message and what routing
//! rules send with it), or of a task change's outbox, in one statement, so all or none
//! commit. When one of them is the numbered message of the sender held on this connection
//! (section 14), the same statement moves its counter.

use tokio_postgres::types::Type;

use super::{PgEngine, msg_id_of};
use crate::boxes::Mailbox;
use crate::engine::Parcel;
use crate::error::Result;

/// One copy to put: its box label, the name it wants, its bytes.
pub(super) struct Copy<'a> {
    pub to: String,
    pub name: &'a str,
    pub body: &'a [u8],
}

/// Every copy of `parcels`, parcel by parcel, box by box.
pub(super) fn copies(parcels: &[Parcel]) -> Vec<Copy<'_>> {
    parcels
        .iter()
        .flat_map(|p| p.to.iter().map(|b| Copy { to: b.label(), name: &p.name, body: &p.content }))
        .collect()
}

impl PgEngine {
    /// Put every copy (each under the first free numbered name in its box) in one statement;
    /// returns the names in order, and whether the pending number went with them (its
    /// counter moved in the same statement). Inside an open task transaction the statement
    /// is part of it.
    pub(super) fn put_copies(&self, copies: &[Copy<'_>]) -> Result<(Vec<String>, bool)> {
        let number = copies.iter().find_map(|c| self.pending_number(c.body));
        let m = number.as_ref();
        let agent = m.map(|m| m.agent.as_str());
        let (epoch, last) = (m.map(|m| m.epoch), m.map(|m| m.last));
        let (from_epoch, from_last) = m.and_then(|m| m.from).unzip();
        let boxes: Vec<&str> = copies.iter().map(|c| c.to.as_str()).collect();
        let names: Vec<&str> = copies.iter().map(|c| c.name).collect();
        let bodies: Vec<&[u8]> = copies.iter().map(|c| c.body).collect();
        let ids: Vec<Option<String>> = copies.iter().map(|c| msg_id_of(c.body)).collect();
        // The journal of the delivery's events, when one waits: its row commits with the
        // copies (`journal.rs`), marked as a numbered delivery's when it carries the number.
        let journal = self.journal_to_insert(number.is_some());
        // A data-modifying WITH runs whatever the main query reads: the counter moves (when
        // there is a number, and it still is the one the hold read) in the statement that
        // stores the copies, and when it did not move no copy is stored.
        let sql = match &journal {
            None => format!(
                "WITH {}
                 SELECT {{s}}.put_message(x.b, x.n, x.body, x.id)
                   FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
                        WITH ORDINALITY AS x(b, n, body, id, o)
                  WHERE $5 IS NULL OR EXISTS (SELECT 1 FROM c)
                  ORDER BY x.o",
                super::seq::counter_cte(5)
            ),
            // The copies are put once (`p`, read twice), and the journal's row names each
            // copy's box, wanted name and the name it got.
            Some(_) => format!(
                "WITH {}, p AS (
                   SELECT {{s}}.put_message(x.b, x.n, x.body, x.id) AS name, x.o
                     FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
                          WITH ORDINALITY AS x(b, n, body, id, o)
                    WHERE $5 IS NULL OR EXISTS (SELECT 1 FROM c)), {}
                 SELECT name FROM p ORDER BY o",
                super::seq::counter_cte(5),
                Self::journal_cte(
                    10,
                    ["$1::text[]", "$2::text[]", "(SELECT array_agg(name ORDER BY o) FROM p)"],
                    "EXISTS (SELECT 1 FROM p)"
                )
            ),
        };
        let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> = vec![
            (&boxes, Type::TEXT_ARRAY),
            (&names, Type::TEXT_ARRAY),
            (&bodies, Type::BYTEA_ARRAY),
            (&ids, Type::TEXT_ARRAY),
            (&agent, Type::TEXT),
            (&epoch, Type::INT8),
            (&last, Type::INT8),
            (&from_epoch, Type::INT8),
            (&from_last, Type::INT8),
        ];
        if let Some(j) = &journal {
            params.extend(super::journal::params(j));
        }
        let put = self.rows("delivering messages", &sql, &params, |r| Ok(r.get::<_, String>(0)))?;
        if journal.is_some() && !put.is_empty() {
            self.journal_inserted();
        }
        if let Some(m) = m
            && put.len() < copies.len()
        {
            return Err(crate::seq::counter_moved(&m.agent));
        }
        Ok((put, number.is_some()))
    }

    /// `Engine::deliver_batch`: every parcel, or none; the names per parcel and box.
    pub(super) fn deliver_all(&self, parcels: &[Parcel]) -> Result<Vec<Vec<String>>> {
        let (names, numbered) = self.put_copies(&copies(parcels))?;
        if numbered {
            self.number_used();
        }
        let mut flat = names.into_iter();
        Ok(parcels.iter().map(|p| flat.by_ref().take(p.to.len()).collect()).collect())
    }

    /// `Engine::deliver`: one message to several boxes.
    pub(super) fn deliver_one(
        &self,
        content: &[u8],
        name: &str,
        to: &[Mailbox],
    ) -> Result<Vec<String>> {
        let copies: Vec<Copy<'_>> =
            to.iter().map(|b| Copy { to: b.label(), name, body: content }).collect();
        let (names, numbered) = self.put_copies(&copies)?;
        if numbered {
            self.number_used();
        }
        Ok(names)
    }
}
