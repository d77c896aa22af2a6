#!/usr/bin/env python3
"""Write a circe root of N finished tasks (10 messages each, in LOGS) and their events as
files, byte for byte what circe writes, for measuring `circe archive` at sizes the library
population takes hours to reach on a loaded 2-core machine. Usage: gen_root.py DIR N."""
import json, os, sys, subprocess

root_dir, n = sys.argv[1], int(sys.argv[2])
circe = os.environ.get("CIRCE_BIN", "circe")
subprocess.run([circe, "init", root_dir], check=True, stdout=subprocess.DEVNULL)
root = os.path.join(root_dir, ".circe")
T = "2030-01-01T00:00:00Z"
status = """v: 2
task_id: {t}
status: completed
owner: engineer
started_at: "{T}"
updated_at: "{T}"
created_at: "{T}"
intent: implement_feature
priority: normal
to: all
opened_by: coordinator
epoch: 1
attempts: 1
expiries: 0
message: {ticket}
"""
msg = """# MESSAGE
from: {frm}
to: {to}
intent: {intent}
task_id: {t}
status: new
created_at: {T}
msg_id: {mid}

## Summary
{summary}
"""
ev = open(os.path.join(root, "LOGS", "events.jsonl"), "w")
eid = 0
def event(**kw):
    global eid
    eid += 1
    d = {"id": eid, "v": 2, "ts": "2030-01-01T00:00:00.000Z"}
    d.update(kw)
    ev.write(json.dumps(d, separators=(",", ":")) + "\n")
logs = os.path.join(root, "LOGS")
tasks = os.path.join(root, "TASKS")
for i in range(n):
    t = f"A{i:06d}"
    ticket = f"20300101_000000_coordinator-all_implement-feature_{t}.md"
    with open(os.path.join(tasks, t + ".status"), "w") as f:
        f.write(status.format(t=t, T=T, ticket=ticket))
    with open(os.path.join(tasks, t + ".checks"), "w") as f:
        f.write("tests_passed: true\n")
    with open(os.path.join(logs, ticket), "w") as f:
        f.write(msg.format(frm="coordinator", to="all", intent="implement_feature", t=t, T=T, mid=f"{t}-1", summary=f"benchmark task {t}"))
    for k in range(2, 11):
        with open(os.path.join(logs, f"20300101_000000_engineer-coordinator_inform_{t}.{k}.md"), "w") as f:
            f.write(msg.format(frm="engineer", to="coordinator", intent="inform", t=t, T=T, mid=f"{t}-{k}", summary=f"note {k} on {t}"))
    files = [{"box": "new", "file": ticket}]
    event(event="open", agent="coordinator", task=t, to="new", epoch=0, files=files, intent="implement_feature", addressed_to="all")
    event(event="claim", agent="engineer", task=t, **{"from": "new"}, to="claimed", epoch=1, files=[{"box": "inbox:engineer", "file": ticket}], attempts=1)
    event(event="start", agent="engineer", task=t, **{"from": "claimed"}, to="in_progress", epoch=1)
    event(event="check", agent="engineer", task=t, check="tests_passed", passed=True, how="asserted")
    event(event="complete", agent="engineer", task=t, **{"from": "in_progress"}, to="completed", epoch=1)
    event(event="done", agent="engineer", task=t, files=[{"box": "logs", "file": ticket}])
ev.close()
# the board is derived: let circe rebuild it
