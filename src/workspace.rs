//! `Workspace`: an opened root (its engine) with its configuration, registry and agents:
//! what every operation works with.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use crate::address::Address;
use crate::config::Config;
use crate::engine::{self, Engine, RootSpec};
use crate::error::{Error, Result};
use crate::names::{AgentName, CheckName};
use crate::registry::Registry;
use crate::task::{Eligibility, Row, TaskState};

pub struct Workspace {
    pub engine: Box<dyn Engine>,
    pub config: Config,
    pub registry: Registry,
    /// agent name -> role, loaded on first use of `agents()` (most commands need one or two
    /// agents' roles, which `role_of` asks the engine for one at a time).
    agents: RefCell<Option<Rc<BTreeMap<AgentName, String>>>>,
    roles: RefCell<HashMap<AgentName, Option<String>>>,
    /// Retired agents (`circe agent retire`), loaded on first use.
    retired: RefCell<Option<BTreeSet<AgentName>>>,
    pinned: Cell<Option<chrono::DateTime<chrono::Utc>>>,
}

impl Workspace {
    /// Open the root `spec` names.
    pub fn open(spec: &RootSpec) -> Result<Workspace> {
        let (engine, config) = engine::open(spec)?;
        Workspace::with_engine(engine, config)
    }

    /// `open` with the durability forced (bulk loading: `Relaxed`).
    pub fn open_with(spec: &RootSpec, durability: crate::config::Durability) -> Result<Workspace> {
        let (engine, config) = engine::open_with(spec, durability)?;
        Workspace::with_engine(engine, config)
    }

    /// A workspace over an engine opened some other way (the in-memory engine of the tests).
    pub fn with_engine(engine: Box<dyn Engine>, config: Config) -> Result<Workspace> {
        // A refused registry keeps the root from opening: the way out needs no opening (a
        // folder root's error names its file and the way out already).
        let registry = Registry::from_config(&config.registry).map_err(|e| {
            if engine.local_folder().is_some() {
                return e;
            }
            let at = engine.location();
            e.hint_more(format!(
                "`circe --root '{at}' config` prints the configuration stored in the database; mend that and replace it whole: `circe --root '{at}' config --set FILE`"
            ))
        })?;
        Ok(Workspace {
            engine,
            config,
            registry,
            agents: RefCell::new(None),
            roles: RefCell::default(),
            retired: RefCell::new(None),
            pinned: Cell::new(None),
        })
    }

    /// The time operations act at: the clock (`CIRCE_NOW` when set), or what `pin_clock` set.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.pinned.get().unwrap_or_else(crate::clock::now)
    }

    /// The time a task transaction decides by: the pinned clock, else the transaction's own
    /// (a database server's clock, or the local clock).
    pub fn tx_now(&self, tx: &dyn crate::engine::TaskTx) -> chrono::DateTime<chrono::Utc> {
        self.pinned.get().unwrap_or_else(|| tx.now())
    }

    /// The time now by the clock that decides leases and deadlines: the pinned clock, else
    /// the root's own (a database server's), else this host's (`CIRCE_NOW` when set). For
    /// reports; a change decides by its transaction's (`tx_now`).
    pub fn root_now(&self) -> Result<chrono::DateTime<chrono::Utc>> {
        if let Some(t) = self.pinned.get() {
            return Ok(t);
        }
        Ok(self.engine.root_clock()?.unwrap_or_else(crate::clock::now))
    }

    /// Make `now` return `t` (a library user's or a test's own clock).
    pub fn pin_clock(&self, t: chrono::DateTime<chrono::Utc>) {
        self.pinned.set(Some(t));
    }

    /// Every agent and its role, sorted by name (read once, until `agents_changed`).
    pub fn agents(&self) -> Rc<BTreeMap<AgentName, String>> {
        if let Some(all) = self.agents.borrow().as_ref() {
            return Rc::clone(all);
        }
        let all: Rc<BTreeMap<AgentName, String>> =
            Rc::new(self.engine.agents().unwrap_or_default().into_iter().collect());
        *self.agents.borrow_mut() = Some(Rc::clone(&all));
        all
    }

    /// This command added agents: what was read of the agents is read again when asked.
    pub fn agents_changed(&self) {
        *self.agents.borrow_mut() = None;
        self.roles.borrow_mut().clear();
    }

    /// The role of `agent`, or `None` when there is no such agent.
    pub fn role_of(&self, agent: &AgentName) -> Option<String> {
        if let Some(all) = self.agents.borrow().as_ref() {
            return all.get(agent).cloned();
        }
        if let Some(known) = self.roles.borrow().get(agent) {
            return known.clone();
        }
        let role = self.engine.agent_role(agent).ok().flatten();
        self.roles.borrow_mut().insert(agent.clone(), role.clone());
        role
    }

    pub fn is_agent(&self, name: &AgentName) -> bool {
        self.role_of(name).is_some()
    }

    /// Is `name` (as typed or read, unchecked) one of this root's agents?
    pub fn is_agent_named(&self, name: &str) -> bool {
        AgentName::new(name).is_ok_and(|a| self.is_agent(&a))
    }

    /// A name a filter gives (`tasks --owner`, `asks --for`): an agent of the root, retired
    /// ones included (their finished work stays listed); else exit 5 with the closest name.
    pub fn known_agent(&self, name: &str) -> Result<()> {
        if self.is_agent_named(name) {
            return Ok(());
        }
        AgentName::new(name)?;
        let all = self.agents();
        Err(crate::suggest::not_found("agent", name, all.keys().map(AgentName::as_str))
            .map_message(|m| format!("{m} in this root"))
            .hint_more("`circe agent list` shows its agents"))
    }

    /// The acting agent: it must exist. A mistyped name gets the closest agent as a hint,
    /// and the root it was looked up in (an agent that ran `circe init` in the wrong folder
    /// finds out where it is).
    pub fn agent(&self, name: Option<&str>) -> Result<(AgentName, String)> {
        let name = name.ok_or_else(|| {
            Error::usage("no acting agent").hint("pass --agent NAME or set CIRCE_AGENT")
        })?;
        let checked = AgentName::new(name).map_err(|e| {
            let all = self.agents();
            match crate::suggest::closest(name, all.keys().map(AgentName::as_str)) {
                Some(c) => e.hint(format!("did you mean `{c}`?")),
                None => e,
            }
        })?;
        let role = self.role_of(&checked).ok_or_else(|| {
            // An agent whose file does not parse is there: said as that, not as a stranger.
            if let Err(e) = self.engine.agent_role(&checked) {
                return e;
            }
            let all = self.agents();
            crate::suggest::not_found("agent", name, all.keys().map(AgentName::as_str))
                .map_message(|m| format!("{m} in this root"))
                .hint_more(format!(
                    "this root is {}: `circe agent list` shows its agents; if your team's root is \
                 elsewhere, pass --root DIR or set CIRCE_ROOT",
                    self.engine.location()
                ))
        })?;
        if self.is_retired(&checked) {
            return Err(Error::refused(format!("agent {checked} is retired"))
                .hint("a retired agent acts no more; `circe agent add NEW-NAME --role ROLE` makes a new one"));
        }
        if let Some(e) = self.unknown_role(&checked, &role) {
            return Err(e);
        }
        Ok((checked, role))
    }

    /// The refusal of an agent whose role the registry does not know (its agent.yaml edited
    /// by hand, or a role taken out of circe.yaml): offered no work, it would only wait.
    /// `None` when the role is one.
    pub fn unknown_role(&self, agent: &AgentName, role: &str) -> Option<Error> {
        if self.registry.is_role(role) {
            return None;
        }
        let guess = crate::suggest::closest(role, self.registry.roles.iter().map(String::as_str))
            .map(|r| format!("did you mean `{r}`? "))
            .unwrap_or_default();
        let file = match self.engine.local_folder() {
            Some(_) => format!("`role:` in AGENTS/{agent}/agent.yaml, "),
            None => String::new(),
        };
        Some(
            Error::refused(format!(
                "agent {agent} has the role `{}`, which is no role of this root: it would be offered no work",
                crate::error::one_line(role)
            ))
            .hint(format!(
                "{guess}correct {file}or add the role under `registry: roles:` in circe.yaml (`circe config --set FILE`); `circe registry` lists the roles"
            )),
        )
    }

    /// The refusal of each active agent whose role the registry does not know (`unknown_role`;
    /// a retired one acts no more, so its role matters no more): what doctor, `agent list`
    /// and `config --set` report.
    pub fn agents_with_unknown_role(&self) -> Vec<Error> {
        self.agents()
            .iter()
            .filter(|(a, _)| !self.is_retired(a))
            .filter_map(|(a, r)| self.unknown_role(a, r))
            .collect()
    }

    /// Has `agent` been retired (`circe agent retire`)?
    pub fn is_retired(&self, agent: &AgentName) -> bool {
        let mut known = self.retired.borrow_mut();
        known
            .get_or_insert_with(|| self.engine.retired().unwrap_or_default().into_iter().collect())
            .contains(agent)
    }

    /// Forget the retired agents read so far (after a retirement).
    pub fn forget_retired(&self) {
        self.retired.borrow_mut().take();
    }

    /// This root's TX mesh names: its own (`tx: mesh:`, else the name of the folder that
    /// holds `.circe`), then its aliases.
    pub fn meshes(&self) -> Vec<String> {
        self.mesh().into_iter().chain(self.config.tx.aliases.iter().cloned()).collect()
    }

    /// This root's own TX mesh name (`tx: mesh:`, else the name of the folder that holds
    /// `.circe` when it is a valid name), if it has one.
    pub fn mesh(&self) -> Option<String> {
        self.config.tx.mesh.clone().or_else(|| {
            let folder = self.engine.local_folder()?;
            let named = if folder.file_name()? == ".circe" { folder.parent()? } else { &folder };
            let holder = named.file_name()?.to_str()?.to_string();
            crate::names::check_agent(&holder).is_ok().then_some(holder)
        })
    }

    /// Is `agent` a coordinator (role coordinator or rooster, the human)?
    pub fn is_coordinator(&self, agent: &AgentName) -> bool {
        matches!(self.role_of(agent).as_deref(), Some("coordinator" | "rooster"))
    }

    /// Agents with role `role`, sorted (retired ones left out).
    pub fn agents_with_role(&self, role: &str) -> Vec<AgentName> {
        self.agents()
            .iter()
            .filter(|(a, r)| r.as_str() == role && !self.is_retired(a))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// The checks the registry requires of `intent` now that a task's checks do not list
    /// (`listed` says which they list): completion counts each as not passed, so a `.checks`
    /// cut by hand, or a check the team added to the intent since the task opened, never
    /// lets a task complete unproven. The one rule: the completion gate, `show`, `tasks` and
    /// the live board all count through it.
    pub fn unlisted_checks(&self, intent: &str, listed: &dyn Fn(&str) -> bool) -> Vec<CheckName> {
        self.registry.intent(intent).map_or_else(Vec::new, |i| {
            i.required_checks
                .iter()
                .filter(|c| !listed(c))
                .filter_map(|c| CheckName::new(c).ok())
                .collect()
        })
    }

    /// The task's checks as its completion demands them: each unlisted one (above) added as
    /// not passed.
    pub fn demand_checks(&self, st: &mut TaskState) {
        for c in self.unlisted_checks(&st.rec.intent, &|c| st.checks.keys().any(|k| k == c)) {
            st.checks.insert(c, false);
        }
    }

    /// A board row whose check count is what its completion would demand: a task not
    /// finished counts each unlisted check (above) as not passed. A finished task's row
    /// stays as its checks were.
    pub fn demanded_row<'a>(&self, mut r: Row<'a>) -> Row<'a> {
        if !r.status.is_terminal() {
            r.checks_total += self.unlisted_checks(&r.intent, &|c| r.lists_check(c)).len();
        }
        r
    }

    /// May `me` (with `role`) take a task addressed to `to` with `intent`? The same answer
    /// as `eligibility(..).admits(..)`, asking only what this one task needs.
    pub fn may_take(&self, me: &AgentName, role: &str, to: &str, intent: &str) -> bool {
        let addr = Address::parse(to);
        let is_role = |n: &str| self.registry.is_role(n);
        if addr.agent(is_role) == Some(me.as_str()) {
            return true;
        }
        let addressed = addr == Address::All || addr.role(is_role) == Some(role);
        addressed && self.registry.may_receive(role, intent)
    }

    /// Which waiting tasks `me` (with `role`) may take: those addressed to it (`agent:NAME`,
    /// or its bare name when no role has that name: a role name means the role); and those
    /// addressed to `all` or to its role (bare or `role:`) whose intent its role may receive.
    pub fn eligibility(&self, me: &AgentName, role: &str) -> Eligibility {
        self.eligibility_at(me, role, self.now())
    }

    /// `eligibility` at the time of the clock that decides leases and deadlines
    /// (`root_now`): what a report says one may take is what a claim would decide.
    pub fn eligibility_by_root_clock(&self, me: &AgentName, role: &str) -> Result<Eligibility> {
        Ok(self.eligibility_at(me, role, self.root_now()?))
    }

    fn eligibility_at(
        &self,
        me: &AgentName,
        role: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Eligibility {
        Eligibility::of(&self.registry, me, role, at)
    }

    /// The agents an address reaches (`all`: every agent), and the roles they have; an
    /// unknown agent or role is exit 5 with the closest name as a hint.
    pub fn reach(&self, to: &str) -> Result<(Vec<AgentName>, Vec<String>)> {
        let addr = Address::parse(to);
        let is_role = |n: &str| self.registry.is_role(n);
        if addr == Address::All {
            let agents: Vec<AgentName> = self.agents().keys().cloned().collect();
            let roles: std::collections::BTreeSet<String> =
                agents.iter().filter_map(|a| self.role_of(a)).collect();
            return Ok((agents, roles.into_iter().collect()));
        }
        if let Some(r) = addr.role(is_role) {
            if !self.registry.is_role(r) {
                let roles = self.registry.roles.iter().map(String::as_str);
                return Err(crate::suggest::not_found("role", r, roles)
                    .hint_more("`circe registry` lists the roles"));
            }
            return Ok((self.agents_with_role(r), vec![r.to_string()]));
        }
        let name = addr.agent(is_role).unwrap_or_default();
        if let Ok(agent) = AgentName::new(name)
            && let Some(role) = self.role_of(&agent)
        {
            return Ok((vec![agent], vec![role]));
        }
        // `agent:NAME` asked for an agent only; a bare name may have meant either.
        let only_agent = matches!(addr, Address::Agent(_));
        let mut known: Vec<String> = self.agents().keys().map(ToString::to_string).collect();
        if !only_agent {
            known.extend(self.registry.roles.iter().cloned());
        }
        let what = if only_agent { "agent" } else { "agent or role" };
        Err(crate::suggest::not_found(what, name, known.iter().map(String::as_str))
            .hint_more("`circe agent list` shows the agents, `circe registry` the roles; `all` reaches everyone"))
    }
}
