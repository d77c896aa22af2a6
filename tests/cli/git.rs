//! A root in a git repository: git keeps none of it, and a linked worktree's commands use
//! the main worktree's root (README "In a git repository").

use std::path::Path;
use std::process::Command;

use crate::common::Env;

/// `git ARGS` in `dir`, which must succeed; its output.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git (README lists it among what circe's tests need)");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository at `env/repo` with one commit, and its root made by `circe init` there.
fn repo_with_root(env: &Env) -> std::path::PathBuf {
    let repo = env.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "a project\n").unwrap();
    env.circe(["init"]).cwd(&repo).run().ok();
    repo
}

/// Open task `task` as the coordinator, run from `dir`.
fn open_from(env: &Env, dir: &Path, task: &str) {
    let send = ["send", "--to", "all", "--intent", "implement_feature", "--task", task];
    env.circe([&send[..], &["--summary", "go"]].concat()).cwd(dir).agent("coordinator").run().ok();
}

/// Everything in `repo` committed (`what`), then a linked worktree at `env/name`.
fn commit_and_add_worktree(env: &Env, repo: &Path, what: &str, name: &str) -> std::path::PathBuf {
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", what]);
    let wt = env.path().join(name);
    git(repo, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    wt
}

#[test]
fn git_leaves_a_root_out_of_every_commit() {
    local_only!("a database root keeps no files in the repository");
    let env = Env::bare();
    let repo = repo_with_root(&env);
    open_from(&env, &repo, "T-1");
    git(&repo, &["add", "-A"]);
    let staged = git(&repo, &["status", "--porcelain"]);
    assert_eq!(staged, "A  README\n", "only the project's own file is staged");
    // A .gitignore written by hand is the team's: init again keeps it.
    std::fs::write(repo.join(".circe/.gitignore"), "*\n!ARCHIVE/\n").unwrap();
    env.circe(["init"]).cwd(&repo).run().ok();
    assert_eq!(std::fs::read_to_string(repo.join(".circe/.gitignore")).unwrap(), "*\n!ARCHIVE/\n");
    env.circe(["doctor"]).cwd(&repo).run().ok();
}

#[test]
fn a_linked_worktree_uses_the_main_worktrees_root() {
    local_only!("a database root is found by its URL, not by folders");
    let env = Env::bare();
    let repo = repo_with_root(&env);
    let wt = commit_and_add_worktree(&env, &repo, "start", "wt-engineer");
    let deep = wt.join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    open_from(&env, &repo, "T-1");
    // From deep inside the worktree: the main worktree's root, its task claimed there.
    let claimed = env.circe(["claim", "--next", "--json"]).cwd(&deep).agent("engineer").run();
    claimed.ok();
    assert_eq!(claimed.json()["task_id"], "T-1", "{}", claimed.show());
    let shown = env.circe(["show", "T-1", "--json"]).cwd(&repo).run();
    assert_eq!(shown.json()["task"]["owner"], "engineer", "{}", shown.show());
    // `init` with no folder named would split the team: refused, nothing made.
    let init = env.circe(["init"]).cwd(&deep).run();
    init.code(3);
    assert!(init.stderr.contains(&repo.join(".circe").display().to_string()), "{}", init.show());
    assert!(init.stderr.contains("circe init ."), "{}", init.show());
    assert!(!deep.join(".circe").exists() && !wt.join(".circe").exists());
    // Named, it is made: a second root for this worktree alone, which its commands then use.
    env.circe(["init", "."]).cwd(&wt).run().ok();
    let tasks = env.circe(["tasks", "--json"]).cwd(&deep).run();
    assert_eq!(tasks.json()["tasks"], serde_json::json!([]), "{}", tasks.show());
}

#[test]
fn a_root_git_copied_into_a_worktree_is_refused_with_the_way_out() {
    local_only!("a database root keeps no files in the repository");
    let env = Env::bare();
    let repo = repo_with_root(&env);
    // A root committed as it was before circe wrote its .gitignore: git keeps its files,
    // not its empty boxes.
    std::fs::remove_file(repo.join(".circe/.gitignore")).unwrap();
    let wt = commit_and_add_worktree(&env, &repo, "with the root", "wt");
    let copy = wt.join(".circe");
    assert!(copy.join("circe.yaml").is_file() && !copy.join("NEW_MESSAGES").exists());
    let before = crate::common::tree(&copy, &[]);
    let main = repo.join(".circe").display().to_string();
    for args in [&["tasks"][..], &["init"], &["init", "."]] {
        let out = env.circe(args).cwd(&wt).run();
        out.code(2);
        assert!(out.stderr.contains("a copy git made"), "{}", out.show());
        assert!(out.stderr.contains(&main), "{}", out.show());
        assert!(out.stderr.contains("git rm -r --cached"), "{}", out.show());
    }
    crate::common::assert_unchanged(&before, &crate::common::tree(&copy, &[]));
    // Its way out, followed: the worktree then uses the main worktree's root.
    std::fs::remove_dir_all(&copy).unwrap();
    open_from(&env, &repo, "T-9");
    env.circe(["show", "T-9"]).cwd(&wt).run().ok();
}

#[test]
fn doctor_reports_a_root_that_git_tracks() {
    local_only!("a database root keeps no files in the repository");
    let env = Env::bare();
    let repo = repo_with_root(&env);
    env.circe(["doctor"]).cwd(&repo).run().ok();
    git(&repo, &["add", "-f", ".circe/circe.yaml"]);
    let doctor = env.circe(["doctor"]).cwd(&repo).run();
    doctor.code(1);
    assert!(doctor.stderr.contains("the root is tracked by git"), "{}", doctor.show());
    assert!(doctor.stderr.contains("git rm -r --cached .circe"), "{}", doctor.show());
    git(&repo, &["rm", "-q", "-r", "--cached", ".circe"]);
    env.circe(["doctor"]).cwd(&repo).run().ok();
}

#[test]
fn a_copy_holding_a_waiting_message_is_a_copy_still() {
    local_only!("a database root keeps no files in the repository");
    let env = Env::bare();
    let repo = repo_with_root(&env);
    open_from(&env, &repo, "T-1");
    std::fs::remove_file(repo.join(".circe/.gitignore")).unwrap();
    let wt = commit_and_add_worktree(&env, &repo, "with the root", "wt");
    assert!(wt.join(".circe/NEW_MESSAGES").is_dir(), "the copy holds the waiting message");
    for args in [&["claim", "T-1"][..], &["init"]] {
        let out = env.circe(args).cwd(&wt).agent("engineer").run();
        out.code(2);
        assert!(out.stderr.contains("a copy git made"), "{}", out.show());
    }
}

#[test]
fn a_worktree_whose_repository_moved_says_so() {
    local_only!("a database root is found by its URL, not by folders");
    let env = Env::bare();
    let repo = repo_with_root(&env);
    let wt = commit_and_add_worktree(&env, &repo, "start", "wt");
    std::fs::rename(&repo, env.path().join("moved")).unwrap();
    let tasks = env.circe(["tasks"]).cwd(&wt).run();
    tasks.code(2);
    assert!(tasks.stderr.contains("git worktree repair"), "{}", tasks.show());
    let init = env.circe(["init"]).cwd(&wt).run();
    init.code(3);
    assert!(!wt.join(".circe").exists(), "init made a second root");
}

#[test]
fn init_in_a_worktree_before_the_main_checkout_has_a_root_points_there() {
    local_only!("a database root is found by its URL, not by folders");
    let env = Env::bare();
    let repo = env.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "a project\n").unwrap();
    let wt = commit_and_add_worktree(&env, &repo, "start", "wt");
    // An agent's first `circe init`, in its worktree: refused, nothing made, the way named.
    let init = env.circe(["init"]).cwd(&wt).run();
    init.code(3);
    assert!(!wt.join(".circe").exists(), "{}", init.show());
    let hint = init.stderr.split('`').nth(1).unwrap_or_default().to_string();
    let words: Vec<&str> = hint.split(' ').map(|w| w.trim_matches('\'')).collect();
    assert_eq!(words.len(), 3, "the hint names one command: {}", init.show());
    assert_eq!(&words[..2], ["circe", "init"], "{}", init.show());
    assert!(std::path::Path::new(words[2]).ends_with("repo"), "{}", init.show());
    // Followed: the root is the main checkout's, and the worktree's commands use it.
    env.circe(["init", words[2]]).cwd(&wt).run().ok();
    open_from(&env, &wt, "T-1");
    let shown = env.circe(["show", "T-1", "--json"]).cwd(&repo).run();
    shown.ok();
    // A root for the worktree alone is still made when asked for by name.
    let other = env.path().join("wt2");
    git(&repo, &["worktree", "add", "-q", other.to_str().unwrap()]);
    env.circe(["init", "."]).cwd(&other).run().ok();
    assert!(other.join(".circe").is_dir());
}
