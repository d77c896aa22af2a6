//! `SendCheck`: the question "may this message be sent?", asked of the registry before a
//! message is written. Fail-closed: anything the registry does not allow is refused.

use super::intent::Intent;
use super::registry::Registry;
use crate::error::{Error, Result};

/// The `to:` address that reaches every role that has agents.
pub const BROADCAST: &str = "all";

/// A message about to be sent, as far as the registry cares.
#[derive(Debug, Clone, Copy)]
pub struct SendCheck<'a> {
    /// The `intent:` header.
    pub intent: &'a str,
    /// The sender's role.
    pub from_role: &'a str,
    /// Every role the message would reach. For `to: all` the caller passes every role that
    /// has agents, and afterwards delivers only to `Registry::receivers`.
    pub to_roles: &'a [&'a str],
    /// What the sender wrote in `to:`, for messages; `all` makes this a broadcast.
    pub to_label: &'a str,
    /// Whether the message carries a `task_id` header.
    pub has_task_id: bool,
}

impl Registry {
    /// Allows the message or says why not. A broadcast (`to: all`) is allowed if at least one
    /// reached role may receive the intent; any other address needs every reached role to.
    pub fn check_send(&self, req: &SendCheck<'_>) -> Result<&Intent> {
        let Some(intent) = self.intent(req.intent) else {
            return Err(self.unknown_intent(req.intent));
        };
        let name = &intent.name;
        if !self.is_role(req.from_role) {
            return Err(self.unknown_role(req.from_role, "sender"));
        }
        if !intent.from.contains(req.from_role) {
            return Err(Error::refused(format!("role `{}` may not send `{name}`", req.from_role))
                .hint(format!("`{name}` may be sent by: {}", intent.from.listed())));
        }
        self.check_receivers(name, req.to_roles, req.to_label)?;
        if intent.needs_task_id && !req.has_task_id {
            return Err(Error::refused(format!("intent `{name}` needs a task_id"))
                .hint("name the task: --task TASK-001 (or a `task_id: TASK-001` header line)"));
        }
        Ok(intent)
    }

    /// The receiving half of `check_send`: the roles a message to `to_label` reaches
    /// (`to_roles`) may receive `intent` (a broadcast: at least one of them).
    pub fn check_receivers(
        &self,
        intent: &str,
        to_roles: &[&str],
        to_label: &str,
    ) -> Result<&Intent> {
        let Some(intent) = self.intent(intent) else {
            return Err(self.unknown_intent(intent));
        };
        let name = &intent.name;
        if to_roles.is_empty() {
            return Err(Error::refused(format!("`to: {to_label}` reaches no role"))
                .hint("address a role (`role:NAME`), an agent or `all`; `circe agent list` lists the agents"));
        }
        if let Some(unknown) = to_roles.iter().find(|r| !self.is_role(r)) {
            return Err(self.unknown_role(unknown, "recipient"));
        }
        if to_label == BROADCAST {
            if self.receivers(name, to_roles).is_empty() {
                return Err(Error::refused(format!(
                    "no role reached by `to: all` may receive `{name}`"
                ))
                .hint(format!("`{name}` may be sent to: {}", intent.to.listed())));
            }
        } else if let Some(bad) = to_roles.iter().find(|r| !intent.to.contains(r)) {
            let msg = if to_label == *bad {
                format!("role `{bad}` may not receive `{name}`")
            } else {
                format!("`to: {to_label}` reaches role `{bad}`, which may not receive `{name}`")
            };
            return Err(Error::refused(msg)
                .hint(format!("`{name}` may be sent to: {}", intent.to.listed())));
        }
        Ok(intent)
    }

    /// The refusal of an intent the registry does not know, with the closest one it does.
    pub fn unknown_intent(&self, name: &str) -> Error {
        let e = Error::refused(format!("unknown intent `{}`", crate::error::one_line(name)));
        match crate::suggest::closest(name, self.intents.keys().map(String::as_str)) {
            Some(near) => {
                e.hint(format!("did you mean `{near}`? `circe registry` lists the intents"))
            }
            None => e.hint("`circe registry` lists the intents"),
        }
    }

    fn unknown_role(&self, role: &str, what: &str) -> Error {
        Error::refused(format!("unknown {what} role `{}`", crate::error::one_line(role))).hint(
            format!(
                "known roles: {}; add roles under `registry: roles:` in circe.yaml",
                self.roles.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    fn send<'a>(intent: &'a str, from: &'a str, to: &'a [&'a str], task: bool) -> SendCheck<'a> {
        let label = if to.len() == 1 { to[0] } else { BROADCAST };
        SendCheck { intent, from_role: from, to_roles: to, to_label: label, has_task_id: task }
    }

    fn refused(r: &Registry, req: &SendCheck<'_>) -> Error {
        let e = r.check_send(req).expect_err("should be refused");
        assert_eq!(e.kind, Kind::Refused);
        assert!(!e.message.ends_with('.'), "{}", e.message);
        assert_eq!(
            e.message.chars().next(),
            e.message.chars().next().map(|c| c.to_ascii_lowercase())
        );
        assert!(e.hint.is_some(), "every refusal has a hint: {}", e.message);
        e
    }

    #[test]
    fn allowed_message_returns_its_intent() {
        let r = Registry::builtin();
        let i =
            r.check_send(&send("implement_feature", "coordinator", &["engineer"], true)).unwrap();
        assert_eq!(i.name, "implement_feature");
    }

    #[test]
    fn unknown_intent_suggests_close_name() {
        let r = Registry::builtin();
        let e = refused(&r, &send("implement-featur", "coordinator", &["engineer"], true));
        assert_eq!(e.message, "unknown intent `implement-featur`");
        assert!(e.hint.unwrap().contains("did you mean `implement_feature`?"));
        let e = refused(&r, &send("deploy_everything", "coordinator", &["engineer"], true));
        let hint = e.hint.unwrap();
        assert!(!hint.contains("did you mean"), "{hint}");
        assert!(hint.contains("circe registry"));
    }

    #[test]
    fn sender_refused_names_allowed_roles() {
        let r = Registry::builtin();
        let e = refused(&r, &send("implement_feature", "engineer", &["engineer"], true));
        assert_eq!(e.message, "role `engineer` may not send `implement_feature`");
        assert_eq!(e.hint.unwrap(), "`implement_feature` may be sent by: coordinator, rooster");
    }

    #[test]
    fn recipient_refused_names_allowed_roles() {
        let r = Registry::builtin();
        let e = refused(&r, &send("test", "engineer", &["coordinator"], true));
        assert_eq!(e.message, "role `coordinator` may not receive `test`");
        assert_eq!(e.hint.unwrap(), "`test` may be sent to: qa");
        let req = SendCheck {
            to_label: "qa-2",
            ..send("implement_feature", "coordinator", &["qa"], true)
        };
        let e = refused(&r, &req);
        assert_eq!(
            e.message,
            "`to: qa-2` reaches role `qa`, which may not receive `implement_feature`"
        );
    }

    #[test]
    fn non_broadcast_needs_every_role_to_receive() {
        let r = Registry::builtin();
        let req = SendCheck {
            to_label: "engineer,qa",
            ..send("fix_bug", "qa", &["engineer", "qa"], true)
        };
        let e = refused(&r, &req);
        assert!(e.message.contains("reaches role `qa`"), "{}", e.message);
    }

    #[test]
    fn broadcast_allowed_if_one_role_may_receive() {
        let r = Registry::builtin();
        let all = ["coordinator", "engineer", "qa", "scribe"];
        assert!(r.check_send(&send("implement_feature", "coordinator", &all, true)).is_ok());
        assert_eq!(r.receivers("implement_feature", &all), vec!["engineer"]);
        let e = refused(&r, &send("audit", "scribe", &all, true));
        assert_eq!(e.message, "no role reached by `to: all` may receive `audit`");
        assert_eq!(e.hint.unwrap(), "`audit` may be sent to: eagle");
    }

    #[test]
    fn missing_task_id() {
        let r = Registry::builtin();
        let e = refused(&r, &send("implement_feature", "coordinator", &["engineer"], false));
        assert_eq!(e.message, "intent `implement_feature` needs a task_id");
        for intent in ["test_results", "claim_task"] {
            let from = if intent == "test_results" { "qa" } else { "engineer" };
            let e = refused(&r, &send(intent, from, &["coordinator"], false));
            assert!(e.message.contains("needs a task_id"), "{intent}");
        }
        assert!(r.check_send(&send("inform", "qa", &["engineer"], false)).is_ok());
        assert!(r.check_send(&send("status_update", "qa", &["coordinator"], false)).is_ok());
    }

    #[test]
    fn unknown_and_missing_roles() {
        let r = Registry::builtin();
        let e = refused(&r, &send("inform", "devops", &["engineer"], false));
        assert_eq!(e.message, "unknown sender role `devops`");
        let e = refused(&r, &send("inform", "qa", &["devops"], false));
        assert_eq!(e.message, "unknown recipient role `devops`");
        let e = refused(&r, &send("inform", "qa", &[], false));
        assert!(e.message.contains("reaches no role"), "{}", e.message);
    }
}
