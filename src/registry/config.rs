//! `RegistryConfig`: the `registry:` section of circe.yaml, and how it extends or narrows the
//! built-in table.
//!
//! Config may add roles and intents. For a built-in intent it may only narrow: fewer senders,
//! fewer recipients, a task id required, more required checks, or a new description. Anything
//! that would let more through (or change what an intent does to tasks) is refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::intent::Intent;
use super::registry::Registry;
use super::roles::Roles;
use crate::error::{Error, Result};
use crate::names;

/// Words that may not be role names: `any` is the rule keyword, `all` the broadcast address,
/// `circe` circe's own acting name.
const RESERVED_ROLES: [&str; 3] = ["any", "all", "circe"];

/// The `registry:` key of circe.yaml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Roles added to the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// New intents, or narrowing rules for built-in ones, by intent name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub intents: BTreeMap<String, IntentRule>,
}

/// One intent's entry under `registry: intents:`. Every field is optional; for a new intent
/// `from` and `to` are required.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IntentRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<RoleList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<RoleList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens_task: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_task_id: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expects_reply: Option<String>,
    /// Required checks; for a built-in intent they are added to the built-in ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<String>>,
}

/// `from:` / `to:` in config: the word `any`, one role name, or a list of role names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RoleList {
    One(String),
    Many(Vec<String>),
}

impl Registry {
    /// The built-in registry with `config` applied.
    pub fn from_config(config: &RegistryConfig) -> Result<Registry> {
        let mut reg = Registry::builtin();
        for role in &config.roles {
            names::check_role(role).map_err(in_config)?;
            if RESERVED_ROLES.contains(&role.as_str()) {
                return Err(Error::refused(format!(
                    "circe.yaml registry: role name `{role}` is reserved"
                ))
                .hint("`any` and `all` are keywords in rules and addresses, `circe` is circe's own name; pick another name"));
            }
            reg.roles.insert(role.clone());
        }
        for (name, rule) in &config.intents {
            names::check_intent(name).map_err(in_config)?;
            let intent = match reg.intents.get(name) {
                Some(builtin) => narrow(builtin, rule, &reg)?,
                None => add(name, rule, &reg)?,
            };
            reg.intents.insert(name.clone(), intent);
        }
        for intent in reg.intents.values() {
            if let Some(reply) = &intent.expects_reply
                && !reg.intents.contains_key(reply)
            {
                return Err(Error::refused(format!(
                    "circe.yaml registry: intent `{}`: `expects_reply` names unknown intent `{reply}`",
                    intent.name
                ))
                .hint("name a built-in intent or one defined under `registry: intents:`"));
            }
        }
        Ok(reg)
    }
}

/// A built-in intent narrowed by `rule`; refused if `rule` would widen it.
fn narrow(builtin: &Intent, rule: &IntentRule, reg: &Registry) -> Result<Intent> {
    let name = &builtin.name;
    let mut out = builtin.clone();
    if let Some(d) = &rule.description {
        out.description.clone_from(d);
    }
    for (field, list, old, new) in [
        ("from", &rule.from, &builtin.from, &mut out.from),
        ("to", &rule.to, &builtin.to, &mut out.to),
    ] {
        let Some(list) = list else { continue };
        let roles = resolve(list, reg, name, field)?;
        if !roles.is_within(old) {
            return Err(Error::refused(format!(
                "circe.yaml registry: intent `{name}`: `{field}` widens the built-in rule (adds {})",
                roles.beyond(old).join(", ")
            ))
            .hint(format!(
                "config may only narrow a built-in intent: list a subset of {}, or define a new intent",
                old.listed()
            )));
        }
        *new = roles;
    }
    if rule.opens_task.is_some_and(|v| v != builtin.opens_task) {
        return Err(Error::refused(format!(
            "circe.yaml registry: intent `{name}`: `opens_task` may not change on a built-in intent"
        ))
        .hint("define a new intent with its own name instead"));
    }
    match rule.needs_task_id {
        Some(false) if builtin.needs_task_id => {
            return Err(Error::refused(format!(
                "circe.yaml registry: intent `{name}`: `needs_task_id: false` widens the built-in rule"
            ))
            .hint("config may only narrow a built-in intent: drop the line or set it to true"));
        }
        Some(true) => out.needs_task_id = true,
        _ => {}
    }
    if let Some(reply) = &rule.expects_reply
        && builtin.expects_reply.as_ref() != Some(reply)
    {
        return Err(Error::refused(format!(
            "circe.yaml registry: intent `{name}`: `expects_reply` may not change on a built-in intent"
        ))
        .hint("define a new intent with its own name instead"));
    }
    if let Some(checks) = &rule.checks {
        check_checks(name, checks, out.opens_task)?;
        for c in checks {
            if !out.required_checks.contains(c) {
                out.required_checks.push(c.clone());
            }
        }
    }
    Ok(out)
}

/// A new intent defined entirely by `rule`.
fn add(name: &str, rule: &IntentRule, reg: &Registry) -> Result<Intent> {
    let side = |field: &str, list: &Option<RoleList>| match list {
        Some(l) => resolve(l, reg, name, field),
        None => {
            Err(Error::refused(format!("circe.yaml registry: new intent `{name}` needs `{field}`"))
                .hint("list role names, or write `any`; `circe registry` shows the built-in rules"))
        }
    };
    let from = side("from", &rule.from)?;
    let to = side("to", &rule.to)?;
    let opens_task = rule.opens_task.unwrap_or(false);
    if opens_task && rule.needs_task_id == Some(false) {
        return Err(Error::refused(format!(
            "circe.yaml registry: intent `{name}`: `needs_task_id: false` contradicts `opens_task: true`"
        ))
        .hint("a task is named by its task_id; drop `needs_task_id`"));
    }
    let checks = rule.checks.clone().unwrap_or_default();
    check_checks(name, &checks, opens_task)?;
    Ok(Intent {
        name: name.to_owned(),
        description: rule.description.clone().unwrap_or_else(|| "custom intent".to_owned()),
        from,
        to,
        opens_task,
        needs_task_id: opens_task || rule.needs_task_id.unwrap_or(false),
        expects_reply: rule.expects_reply.clone(),
        required_checks: checks,
    })
}

/// Turns a config role list into `Roles`, refusing unknown roles and a misplaced `any`.
fn resolve(list: &RoleList, reg: &Registry, intent: &str, field: &str) -> Result<Roles> {
    let names: Vec<&str> = match list {
        RoleList::One(one) if one == "any" => return Ok(Roles::Any),
        RoleList::One(one) => vec![one.as_str()],
        RoleList::Many(many) => many.iter().map(String::as_str).collect(),
    };
    for &role in &names {
        if role == "any" {
            return Err(Error::refused(format!(
                "circe.yaml registry: intent `{intent}`: `{field}` lists `any` among roles"
            ))
            .hint(format!("write `{field}: any` on its own, or list role names")));
        }
        if !reg.is_role(role) {
            return Err(Error::refused(format!(
                "circe.yaml registry: intent `{intent}`: `{field}` names unknown role `{role}`"
            ))
            .hint(
                match crate::suggest::closest(role, reg.roles.iter().map(String::as_str)) {
                    Some(near) => {
                        format!("did you mean `{near}`? Or add `{role}` under `registry: roles:`")
                    }
                    None => format!(
                        "known roles: {}; add roles under `registry: roles:`",
                        reg.roles.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
                    ),
                },
            ));
        }
    }
    Ok(Roles::only(names))
}

/// Check names become keys of a task's `.checks` record: lowercase letters, digits and `_`.
fn check_checks(intent: &str, checks: &[String], opens_task: bool) -> Result<()> {
    if !checks.is_empty() && !opens_task {
        return Err(Error::refused(format!(
            "circe.yaml registry: intent `{intent}`: `checks` apply only to intents that open a task"
        ))
        .hint("required checks gate completing a task; this intent opens none"));
    }
    for c in checks {
        let ok = c.len() <= names::MAX_LEN
            && c.starts_with(|ch: char| ch.is_ascii_lowercase())
            && c.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_');
        if !ok {
            return Err(Error::refused(format!(
                "circe.yaml registry: intent `{intent}`: check name `{}` is not allowed",
                crate::error::one_line(c)
            ))
            .hint("check names use a-z, 0-9 and '_', start with a letter, at most 64 bytes"));
        }
    }
    Ok(())
}

/// Marks a name error as coming from circe.yaml.
fn in_config(mut e: Error) -> Error {
    e.message = format!("circe.yaml registry: {}", e.message);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;
    use crate::registry::SendCheck;

    const EXAMPLE: &str = "\
roles: [devops]
intents:
  deploy: { from: [coordinator], to: [devops], opens_task: true, checks: [deployed] }
  fix_bug: { from: [coordinator, qa] }
";

    fn parse(yaml: &str) -> RegistryConfig {
        crate::yaml::from_str::<RegistryConfig>(yaml).unwrap()
    }

    fn refused(yaml: &str) -> Error {
        let e = Registry::from_config(&parse(yaml)).expect_err("config should be refused");
        assert_eq!(e.kind, Kind::Refused);
        assert!(e.hint.is_some(), "{}", e.message);
        assert!(!e.message.ends_with('.'));
        e
    }

    fn sends(r: &Registry, intent: &str, from: &str, to: &str, task: bool) -> bool {
        r.check_send(&SendCheck {
            intent,
            from_role: from,
            to_roles: &[to],
            to_label: to,
            has_task_id: task,
        })
        .is_ok()
    }

    #[test]
    fn example_parses() {
        let c = parse(EXAMPLE);
        assert_eq!(c.roles, ["devops"]);
        let deploy = &c.intents["deploy"];
        assert_eq!(deploy.from, Some(RoleList::Many(vec!["coordinator".into()])));
        assert_eq!(deploy.opens_task, Some(true));
        assert_eq!(deploy.checks.as_deref(), Some(&["deployed".to_owned()][..]));
        assert_eq!(c.intents["fix_bug"].to, None);
        let any = parse("intents:\n  ping: { from: any, to: qa }\n");
        assert_eq!(any.intents["ping"].from, Some(RoleList::One("any".into())));
        assert_eq!(parse("{}"), RegistryConfig::default());
    }

    #[test]
    fn unknown_fields_are_rejected() {
        assert!(crate::yaml::from_str::<RegistryConfig>("rolez: [x]\n").is_err());
        assert!(
            crate::yaml::from_str::<RegistryConfig>("intents:\n  x: { form: [qa] }\n").is_err()
        );
    }

    #[test]
    fn adds_roles_and_intents() {
        let r = Registry::from_config(&parse(EXAMPLE)).unwrap();
        assert!(r.is_role("devops"));
        let deploy = r.intent("deploy").unwrap();
        assert!(deploy.opens_task && deploy.needs_task_id);
        assert_eq!(deploy.required_checks, ["deployed"]);
        assert!(sends(&r, "deploy", "coordinator", "devops", true));
        assert!(!sends(&r, "deploy", "coordinator", "devops", false), "task id needed");
        assert!(!sends(&r, "deploy", "engineer", "devops", true));
        assert!(!sends(&r, "deploy", "coordinator", "engineer", true));
        assert!(sends(&r, "inform", "devops", "qa", false), "new roles join `any` rules");
    }

    #[test]
    fn narrows_builtin_intents() {
        let r = Registry::from_config(&parse(EXAMPLE)).unwrap();
        assert!(sends(&r, "fix_bug", "qa", "engineer", true));
        assert!(!sends(&r, "fix_bug", "engineer", "engineer", true), "narrowed away");
        assert_eq!(
            r.intent("fix_bug").unwrap().to,
            Registry::builtin().intent("fix_bug").unwrap().to
        );

        let yaml = "intents:\n  status_update: { needs_task_id: true }\n  implement_feature: { checks: [peer_reviewed, tests_passed], description: build it }\n  prompt: { from: [rooster], to: [] }\n";
        let r = Registry::from_config(&parse(yaml)).unwrap();
        assert!(!sends(&r, "status_update", "qa", "coordinator", false));
        let f = r.intent("implement_feature").unwrap();
        assert_eq!(f.required_checks, ["tests_passed", "peer_reviewed"]);
        assert_eq!(f.description, "build it");
        assert!(!sends(&r, "prompt", "rooster", "qa", false), "`to: []` disables an intent");
    }

    #[test]
    fn widening_is_refused() {
        let e = refused("intents:\n  implement_feature: { from: [coordinator, engineer] }\n");
        assert_eq!(
            e.message,
            "circe.yaml registry: intent `implement_feature`: `from` widens the built-in rule (adds engineer)"
        );
        assert!(e.hint.unwrap().contains("coordinator, rooster"));
        let e = refused("intents:\n  test: { to: any }\n");
        assert!(
            e.message.contains("intent `test`: `to` widens") && e.message.contains("adds any"),
            "{}",
            e.message
        );
        let e = refused("intents:\n  test_results: { needs_task_id: false }\n");
        assert!(
            e.message.contains("`test_results`: `needs_task_id: false` widens"),
            "{}",
            e.message
        );
        let e = refused("intents:\n  inform: { opens_task: true }\n");
        assert!(e.message.contains("`opens_task` may not change"), "{}", e.message);
        let e = refused("intents:\n  ask: { expects_reply: answer }\n");
        assert!(e.message.contains("`expects_reply` may not change"), "{}", e.message);
        // Restating a built-in value is not a change.
        assert!(
            Registry::from_config(&parse(
                "intents:\n  ask: { expects_reply: ask-response, opens_task: false }\n"
            ))
            .is_ok()
        );
    }

    #[test]
    fn unknown_and_invalid_names_are_refused() {
        let e = refused("intents:\n  deploy: { from: [coordinator], to: [devops] }\n");
        assert!(e.message.contains("`to` names unknown role `devops`"), "{}", e.message);
        let e = refused("intents:\n  fix_bug: { from: [ghost] }\n");
        assert!(e.message.contains("unknown role `ghost`"), "{}", e.message);
        assert!(e.hint.as_deref().unwrap().starts_with("known roles: "), "{e:?}");
        let e = refused("intents:\n  fix_bug: { from: [enginer] }\n");
        assert!(e.hint.as_deref().unwrap().starts_with("did you mean `engineer`?"), "{e:?}");
        let e = refused("roles: [Dev_Ops]\n");
        assert!(e.message.starts_with("circe.yaml registry: role name"), "{}", e.message);
        for reserved in ["all", "any", "circe"] {
            let e = refused(&format!("roles: [{reserved}]\n"));
            assert!(e.message.contains("reserved"), "{reserved}: {}", e.message);
        }
        let e = refused("intents:\n  Deploy: { from: any, to: any }\n");
        assert!(e.message.starts_with("circe.yaml registry: intent `Deploy`"), "{}", e.message);
        let e = refused("intents:\n  deploy: { from: [any, qa], to: any }\n");
        assert!(e.message.contains("lists `any` among roles"), "{}", e.message);
    }

    #[test]
    fn new_intent_rules() {
        let e = refused("intents:\n  deploy: { to: any }\n");
        assert!(e.message.contains("new intent `deploy` needs `from`"), "{}", e.message);
        let e = refused(
            "intents:\n  deploy: { from: any, to: any, opens_task: true, needs_task_id: false }\n",
        );
        assert!(e.message.contains("contradicts"), "{}", e.message);
        let e = refused("intents:\n  deploy: { from: any, to: any, checks: [deployed] }\n");
        assert!(e.message.contains("apply only to intents that open a task"), "{}", e.message);
        let e = refused(
            "intents:\n  deploy: { from: any, to: any, opens_task: true, checks: [Deployed] }\n",
        );
        assert!(e.message.contains("check name"), "{}", e.message);
        let e = refused("intents:\n  deploy: { from: any, to: any, expects_reply: deployed }\n");
        assert!(e.message.contains("unknown intent `deployed`"), "{}", e.message);
        let ok = "intents:\n  deploy: { from: any, to: any, expects_reply: deployed }\n  deployed: { from: any, to: any, needs_task_id: true }\n";
        let r = Registry::from_config(&parse(ok)).unwrap();
        assert_eq!(r.intent("deploy").unwrap().expects_reply.as_deref(), Some("deployed"));
        assert!(!r.intent("deploy").unwrap().needs_task_id);
        assert!(r.intent("deployed").unwrap().needs_task_id);
    }

    #[test]
    fn builtin_roles_may_be_restated() {
        let r = Registry::from_config(&parse("roles: [qa, devops]\n")).unwrap();
        assert_eq!(r.roles.len(), 7);
    }
}
