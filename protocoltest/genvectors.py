# Generates vectors/*.json, the protocol conformance vectors (see README.md).
# Edit the vectors here and run: python3 protocoltest/genvectors.py
import json, os
T0 = "2026-01-02T03:04:05Z"
def hello(resume=None, features=None):
    h = {"type": "hello", "protocol": "helmr.session.v1", "pid": "$number"}
    if resume is not None: h["resume"] = resume
    if features is not None: h["features"] = features
    return {"expect": h, "note": "hello"}
def welcome(kind="initial", agent="conformance"):
    return {"send": {"type": "welcome", "welcome": {"agent": agent, "session_id": "0197a3c2-5b1e-7c40-9a55-2f1e0c9d8b11",
        "session_key": "conf-1", "computer_id": "0197a3c2-5b9f-7d01-8e2a-6a4b1c0f3e77",
        "deployment_id": "0197a3c1-0e44-7a10-b0c3-91d2e8f4a605", "recovery": {"kind": kind}, "server_time": T0}}}
def ready(): return {"expect": {"type": "ready"}, "note": "ready after init"}
def start(tid, inp, seq=1):
    return {"send": {"type": "turn.start", "turn_id": tid, "turn": {"id": tid, "sequence": seq, "created_at": T0, "input": inp, "source": {"kind": "user"}}}}
def settle(tid, status="completed", op="$any", **kw):
    m = {"type": "turn.settle", "turn_id": tid, "op": op, "status": status}
    m.update(kw)
    return m
def err(code): return {"code": code, "message": "$optional"}
def shutdown(): return [{"send": {"type": "shutdown"}}, {"expect": {"type": "stopping"}}, {"expect_close": 1000}, {"expect_exit": 0}]
def text(s): return [{"type": "text", "text": s}]
open_ = lambda: [hello(), welcome(), ready()]
V = {}
V["manifest"] = dict(description="--helmr-manifest prints the manifest (section 1) and exits 0", args=["--helmr-manifest"], steps=[
    {"expect_stdout": {"version": "helmr.manifest.v1", "sdk": "$string", "runtime": "$optional",
        "agents": [
            {"id": "conformance", "template": "box", "input_kind": "json", "has_init": True, "close_after_idle": "7d", "hibernate_after_idle": "never"},
            {"id": "init-fails", "template": "box", "input_kind": "text", "has_init": True, "close_after_idle": "7d", "hibernate_after_idle": "never"}],
        "templates": [{"id": "box", "image": {"name": "box", "host": True}, "resources": {"cpu": 1, "memory": "256MiB"}}]}},
    {"expect_exit": 0}])
V["handshake"] = dict(description="hello, welcome, init, ready; an idle shutdown: stopping, close 1000, exit 0 (sections 3, 10)",
    steps=open_() + shutdown())
V["context"] = dict(description="the welcome's identity, the recovery kind and init's result reach the handler; the Turn's id, sequence and source", auto_ack=True,
    steps=open_() + [start("t1", {"do": "info"}, seq=3), {"expect": settle("t1", result={"session_id": "0197a3c2-5b1e-7c40-9a55-2f1e0c9d8b11",
        "session_key": "conf-1", "computer_id": "0197a3c2-5b9f-7d01-8e2a-6a4b1c0f3e77", "deployment_id": "0197a3c1-0e44-7a10-b0c3-91d2e8f4a605",
        "recovery": "initial", "init_ready": True, "turn_id": "t1", "turn_sequence": 3, "source": "user"})}] + shutdown())
V["ops-and-acks"] = dict(description="ops numbered from 1 per Turn, one at a time; the output's ack gives its sequence; the response travels with the completed settle (sections 5, 6)",
    steps=open_() + [start("t1", {"do": "echo", "text": "hi"}),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("echo: hi")}},
        {"quiet": "200ms", "note": "nothing before the ack"},
        {"send": {"type": "ack", "turn_id": "t1", "op": 1, "sequence": 41}},
        {"expect": settle("t1", op=2, result={"echo": "hi", "sequence": 41}, response=text("echoed hi"), error="$absent")},
        {"send": {"type": "ack", "turn_id": "t1", "op": 2}},
        start("t2", {"do": "echo", "text": "again"}, seq=2),
        {"expect": {"type": "output", "turn_id": "t2", "op": 1, "content": text("echo: again")}, "note": "a new Turn numbers from 1"},
        {"send": {"type": "ack", "turn_id": "t2", "op": 1, "sequence": 42}},
        {"expect": settle("t2", op=2, result={"echo": "again", "sequence": 42}, response=text("echoed again"))},
        {"send": {"type": "ack", "turn_id": "t2", "op": 2}}] + shutdown())
V["replay-after-reconnect"] = dict(description="a lost connection is redialled; hello carries resume; every op without an ack is replayed with its number (section 2)",
    steps=open_() + [start("t1", {"do": "echo", "text": "hi"}),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("echo: hi")}},
        {"drop": True},
        hello(resume={"ready": True, "turn_id": "t1"}), welcome("reattached"),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("echo: hi")}, "note": "the unacknowledged output, replayed"},
        {"send": {"type": "ack", "turn_id": "t1", "op": 1, "sequence": 7}},
        {"expect": settle("t1", op=2, result={"echo": "hi", "sequence": 7})},
        {"drop": True, "note": "the settle's ack is lost too"},
        hello(resume={"ready": True, "turn_id": "t1"}), welcome("reattached"),
        {"expect": settle("t1", op=2, result={"echo": "hi", "sequence": 7}), "note": "the settle, replayed"},
        {"send": {"type": "ack", "turn_id": "t1", "op": 2}}] + shutdown())
V["output-limits"] = dict(description="65 parts and 256 KiB + 1 are refused by the SDK with limit_exceeded and never sent; a refused ack is an error to the writer and the Turn goes on (section 7)",
    steps=open_() + [start("t1", {"do": "limits"}),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("after")}, "note": "nothing was sent for the refused writes"},
        {"send": {"type": "ack", "turn_id": "t1", "op": 1, "error": {"code": "limit_exceeded", "message": "the turn's output budget is spent", "details": {"used": 8388608, "size": 7}}}},
        {"expect": settle("t1", op=2, result={"local": ["limit_exceeded", "limit_exceeded"], "server": "limit_exceeded"})},
        {"send": {"type": "ack", "turn_id": "t1", "op": 2}}] + shutdown())
V["respond-once"] = dict(description="a second respond fails with response_already_staged; the first response is sent with the settle", auto_ack=True,
    steps=open_() + [start("t1", {"do": "respond_twice"}),
        {"expect": settle("t1", result={"second": "response_already_staged"}, response=text("one"))}] + shutdown())
V["messages"] = dict(description="messages to the running Turn: accepted once each (a repeat is ignored), MessageRejected is message.reject with message_rejected and the Turn goes on (section 8)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "messages"}),
        {"send": {"type": "message", "turn_id": "t1", "message": {"id": "m1", "content": text("a"), "source": {"kind": "user"}}}},
        {"expect": {"type": "message.accept", "turn_id": "t1", "op": "$number", "message_id": "m1"}},
        {"send": {"type": "message", "turn_id": "t1", "message": {"id": "m1", "content": text("a"), "source": {"kind": "user"}}}, "note": "m1 again"},
        {"quiet": "300ms", "note": "a repeated message is not handled again"},
        {"send": {"type": "message", "turn_id": "t1", "message": {"id": "m2", "content": text("reject"), "source": {"kind": "user"}}}},
        {"expect": {"type": "message.reject", "turn_id": "t1", "op": "$number", "message_id": "m2", "reason": "message_rejected", "error": err("message_rejected")}},
        {"send": {"type": "message", "turn_id": "t9", "message": {"id": "m9", "content": text("elsewhere"), "source": {"kind": "user"}}}, "note": "a message for another Turn"},
        {"send": {"type": "message", "turn_id": "t1", "message": {"id": "m3", "content": text("done"), "source": {"kind": "user"}}}},
        {"expect_unordered": [{"type": "message.accept", "turn_id": "t1", "message_id": "m3"}, settle("t1", result={"got": ["a", "done"]})]}] + shutdown())
V["cancel-interrupted"] = dict(description="cancel (interrupted) ends the Turn: settle interrupted/interrupted; the process serves the next Turn (section 9)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "block"}), {"quiet": "200ms"},
        {"send": {"type": "cancel", "turn_id": "t9", "reason": "interrupted"}, "note": "a cancel for another Turn is ignored"},
        {"quiet": "200ms"},
        {"send": {"type": "cancel", "turn_id": "t1", "reason": "interrupted"}},
        {"expect": settle("t1", "interrupted", error=err("interrupted"), result="$absent", response="$absent")},
        start("t2", {"do": "echo", "text": "next"}, seq=2),
        {"expect": {"type": "output", "turn_id": "t2", "op": 1, "content": text("echo: next")}},
        {"expect": settle("t2", op=2, result={"echo": "next", "sequence": 1})}] + shutdown())
V["cancel-deadline"] = dict(description="cancel with reason deadline settles interrupted with deadline_exceeded (section 9)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "block"}), {"quiet": "100ms"},
        {"send": {"type": "cancel", "turn_id": "t1", "reason": "deadline"}},
        {"expect": settle("t1", "interrupted", error=err("deadline_exceeded"))}] + shutdown())
V["cancel-cleanup-fails"] = dict(description="a failing onCancel callback settles cleanup_failed; the process then exits 3 (section 9)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "block", "cleanup": "fail"}), {"quiet": "100ms"},
        {"send": {"type": "cancel", "turn_id": "t1", "reason": "interrupted"}},
        {"expect": settle("t1", "interrupted", error=err("cleanup_failed"))},
        {"expect_exit": 3}])
V["handler-fails"] = dict(description="a thrown error settles failed with handler_failed; invalid input settles failed with input_invalid; the process stays (section 6)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "fail"}),
        {"expect": settle("t1", "failed", error=err("handler_failed"), result="$absent")},
        start("t2", {"do": 5}, seq=2),
        {"expect": settle("t2", "failed", error=err("input_invalid"))},
        start("t3", {"do": "echo", "text": "ok"}, seq=3),
        {"expect": {"type": "output", "turn_id": "t3", "content": text("echo: ok")}},
        {"expect": settle("t3", result={"echo": "ok", "sequence": 1})}] + shutdown())
V["traced-turn"] = dict(description="a turn.start with traceparent: the Turn runs as usual; the SDK may ship its spans in a spans message (at least its handler's) before the settle, and sends none for an untraced Turn (observability.md)", auto_ack=True,
    steps=open_() + [{"send": {"type": "turn.start", "turn_id": "t1", "turn": {"id": "t1", "sequence": 1, "created_at": T0, "input": {"do": "echo", "text": "hi"},
            "source": {"kind": "user"}, "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-800000000000abcd-01"}}},
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("echo: hi")}},
        {"expect": {"type": "spans", "turn_id": "t1", "spans": "$any"}, "note": "the Turn's spans, before its settle"},
        {"expect": settle("t1", op=2, result={"echo": "hi", "sequence": "$number"})},
        start("t2", {"do": "echo", "text": "plain"}, seq=2),
        {"expect": {"type": "output", "turn_id": "t2", "op": 1, "content": text("echo: plain")}},
        {"expect": settle("t2", op=2, result={"echo": "plain", "sequence": "$number"}), "note": "no spans for an untraced Turn"}] + shutdown())
V["wait-timer"] = dict(description="timers.waitFor is a durable wait.start of kind timer, resolved by wait.resolved (waits.md)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "timer", "for": "1h"}),
        {"expect": {"type": "wait.start", "turn_id": "t1", "op": 1, "wait": {"id": "$capture:w", "kind": "timer", "until": "$string"}}},
        {"quiet": "200ms", "note": "the process waits for the server"},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "other", "outcome": {"status": "resolved"}}, "note": "an outcome for a wait it does not block on is ignored"},
        {"quiet": "200ms"},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "$ref:w", "outcome": {"status": "resolved"}}},
        {"expect": settle("t1", op=2, result={"timer": "fired"})}] + shutdown())
V["wait-ask"] = dict(description="ask is an op with the question (process-chosen id), then a wait.start of kind ask on it", auto_ack=True,
    steps=open_() + [start("t1", {"do": "ask"}),
        {"expect": {"type": "ask", "turn_id": "t1", "op": 1, "ask": {"id": "$capture:q", "question": {"prompt": text("Your name?"), "answer": {"type": "text"}}}}},
        {"expect": {"type": "wait.start", "turn_id": "t1", "op": 2, "wait": {"id": "$capture:w", "kind": "ask", "target_id": "$ref:q"}}},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "$ref:w", "outcome": {"status": "resolved", "value": "Ada", "responded_by": {"kind": "api_key", "id": "key-1"}}}},
        {"expect": settle("t1", op=3, result={"answer": "Ada", "by": "api_key"})}] + shutdown())
V["wait-token"] = dict(description="tokens.create sends token.create with a process-chosen id and hlmr_tok_ secret; token.wait is a wait.start of kind token", auto_ack=True,
    steps=open_() + [start("t1", {"do": "token"}),
        {"expect": {"type": "token.create", "turn_id": "t1", "op": 1, "token": {"id": "$capture:tok", "secret": "$prefix:hlmr_tok_", "create": {"timeout": "1h"}}}},
        {"expect": {"type": "wait.start", "turn_id": "t1", "op": 2, "wait": {"id": "$capture:w", "kind": "token", "target_id": "$ref:tok"}}},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "$ref:w", "outcome": {"status": "resolved", "value": {"approved": True}}}},
        {"expect": settle("t1", op=3, result={"token_id": "$ref:tok", "callback_url": "$prefix:http://helmr.invalid/v1/tokens/", "public": True, "value": {"approved": True}})}] + shutdown())
V["wait-failed-outcome"] = dict(description="a failed wait outcome is the waiter's error: the Turn fails with its code (token_expired)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "token"}),
        {"expect": {"type": "token.create", "turn_id": "t1", "token": {"id": "$capture:tok"}}},
        {"expect": {"type": "wait.start", "turn_id": "t1", "wait": {"id": "$capture:w", "kind": "token"}}},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "$ref:w", "outcome": {"status": "failed", "error": {"code": "token_expired", "message": "the token expired"}}}},
        {"expect": settle("t1", "failed", error=err("token_expired"))}] + shutdown())
V["wait-resume-after-reconnect"] = dict(description="after a reconnect, the process asks with wait.resume for each wait it still blocks on (section 2)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "timer", "for": "1h"}),
        {"expect": {"type": "wait.start", "turn_id": "t1", "wait": {"id": "$capture:w", "kind": "timer"}}},
        {"quiet": "100ms"},
        {"drop": True},
        hello(resume={"ready": True, "turn_id": "t1"}), welcome("reattached"),
        {"expect": {"type": "wait.resume", "turn_id": "t1", "wait_id": "$ref:w"}},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "$ref:w", "outcome": {"status": "resolved"}}},
        {"expect": settle("t1", result={"timer": "fired"})}] + shutdown())
V["wait-cancelled"] = dict(description="a cancel during a wait withdraws it (wait.cancel) before the Turn settles interrupted", auto_ack=True,
    steps=open_() + [start("t1", {"do": "timer", "for": "1h"}),
        {"expect": {"type": "wait.start", "turn_id": "t1", "wait": {"id": "$capture:w", "kind": "timer"}}},
        {"send": {"type": "cancel", "turn_id": "t1", "reason": "interrupted"}},
        {"expect": {"type": "wait.cancel", "turn_id": "t1", "op": 2, "wait_id": "$ref:w"}},
        {"expect": settle("t1", "interrupted", op=3, error=err("interrupted"))}] + shutdown())
V["mcp-scope"] = dict(description="mcp.getConnectionOptions(policy) sends mcp.scope with a call_id and the policy; mcp.result answers with the normalized scope or an error", auto_ack=True,
    steps=open_() + [start("t1", {"do": "mcp"}),
        {"expect": {"type": "mcp.scope", "call_id": "$capture:c1", "mcp": {"scope": {"allow": [{"operation": "start", "agents": ["conformance"]}]}}}},
        {"send": {"type": "mcp.result", "call_id": "$ref:c1", "result": {"allow": [{"operation": "start", "agents": ["conformance"], "computer": "new"}]}}},
        {"expect": {"type": "mcp.scope", "call_id": "$capture:c2", "mcp": {"scope": {"allow": [{"operation": "cancel_session", "agents": ["conformance"]}]}}}},
        {"send": {"type": "mcp.result", "call_id": "$ref:c2", "error": {"code": "forbidden", "message": "the scope is wider than the Agent's maximum"}}},
        {"expect": settle("t1", op=1, result={"loopback": True, "refused": "forbidden"})}] + shutdown())
V["shutdown-during-turn"] = dict(description="shutdown while a Turn runs: stopping, the Turn settles interrupted, close 1000, exit 0 (section 10)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "block"}), {"quiet": "100ms"},
        {"send": {"type": "shutdown"}},
        {"expect": {"type": "stopping"}},
        {"expect": settle("t1", "interrupted", error=err("interrupted"))},
        {"expect_close": 1000}, {"expect_exit": 0}])
V["sigterm"] = dict(description="SIGTERM drains like shutdown: stopping, the running Turn settles interrupted, close 1000, exit 0 (section 10)", auto_ack=True,
    steps=open_() + [start("t1", {"do": "block"}), {"quiet": "100ms"},
        {"signal": "SIGTERM"},
        {"expect": {"type": "stopping"}},
        {"expect": settle("t1", "interrupted", error=err("interrupted"))},
        {"expect_close": 1000}, {"expect_exit": 0}])
# Parking (protocol.md, section 10, "Parking"): the process announces park in
# every hello; on park it closes with 1000 "parked", dials no sooner than the
# pause, and rejoins as after a lost connection.
park_open = lambda: [hello(features=["park"]), welcome(), ready()]
def park(pause):
    return [{"send": {"type": "park", "pause": pause}},
        {"expect_close": 1000, "close_reason": "parked", "note": "the process closes its connection"}]
V["park-wait-ask"] = dict(description="a Turn waits on a question; the server parks the process: close 1000 \"parked\", no dial before the pause, hello with resume and features, wait.resume; the answer settles the Turn (section 10, Parking)", auto_ack=True,
    steps=park_open() + [start("t1", {"do": "ask"}),
        {"expect": {"type": "ask", "turn_id": "t1", "op": 1, "ask": {"id": "$capture:q"}}},
        {"expect": {"type": "wait.start", "turn_id": "t1", "op": 2, "wait": {"id": "$capture:w", "kind": "ask", "target_id": "$ref:q"}}},
        {"quiet": "100ms"}] + park("2s") + [
        {"no_dial": "1500ms", "note": "nothing before the pause has passed (less the runner's own delay)"},
        hello(resume={"ready": True, "turn_id": "t1"}, features=["park"]), welcome("reattached"),
        {"expect": {"type": "wait.resume", "turn_id": "t1", "wait_id": "$ref:w"}},
        {"send": {"type": "wait.resolved", "turn_id": "t1", "wait_id": "$ref:w", "outcome": {"status": "resolved", "value": "Ada", "responded_by": {"kind": "api_key", "id": "key-1"}}}},
        {"expect": settle("t1", op=3, result={"answer": "Ada", "by": "api_key"})}] + shutdown())
V["park-idle"] = dict(description="an idle ready process is parked: it closes, does not dial before the pause, rejoins with resume {ready: true} and no Turn, and serves the next Turn (section 10, Parking)", auto_ack=True,
    steps=park_open() + park("2s") + [
        {"no_dial": "1500ms", "note": "nothing before the pause has passed (less the runner's own delay)"},
        hello(resume={"ready": True, "turn_id": "$absent"}, features=["park"]), welcome("reattached"),
        {"quiet": "200ms", "note": "no op to replay, no wait to resume"},
        start("t1", {"do": "echo", "text": "back"}),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("echo: back")}},
        {"expect": settle("t1", op=2, result={"echo": "back", "sequence": 1})}] + shutdown())
V["park-write-during-pause"] = dict(description="a handler that writes during a park's pause (woken on its own clock): nothing is written on the closed connection and no dial happens early; the op goes after the rejoin (section 10, Parking)", auto_ack=True,
    steps=park_open() + [start("t1", {"do": "nap", "for": "400ms"})] + park("2s") + [
        {"no_dial": "1500ms", "note": "the nap ends and the handler writes during the pause; no dial before it has passed"},
        hello(resume={"ready": True, "turn_id": "t1"}, features=["park"]), welcome("reattached"),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("awake")}, "note": "the write made during the pause"},
        {"expect": settle("t1", op=2, result={"napped": True})}] + shutdown())
V["park-ignored"] = dict(description="a park before the welcome, and a park whose pause is not a Duration, are ignored: the connection stays (section 10, Parking)", auto_ack=True,
    steps=[hello(features=["park"]), {"send": {"type": "park", "pause": "1s"}}, {"quiet": "300ms", "note": "no close before the welcome"},
        welcome(), ready(),
        {"send": {"type": "park", "pause": "soon"}}, {"quiet": "300ms", "note": "no close for a bad pause"},
        start("t1", {"do": "echo", "text": "still here"}),
        {"expect": {"type": "output", "turn_id": "t1", "op": 1, "content": text("echo: still here")}},
        {"expect": settle("t1", op=2, result={"echo": "still here", "sequence": 1})}] + shutdown())
V["init-fails"] = dict(description="an init that throws sends init.failed (handler_failed) and exits 1 (section 3)", agent="init-fails",
    steps=[hello(), welcome(agent="init-fails"), {"expect": {"type": "init.failed", "error": {"code": "handler_failed", "message": "$string"}}}, {"expect_exit": 1}])
V["unknown-agent"] = dict(description="an Agent the program does not have: init.failed with not_found, exit 1", agent="nope",
    steps=[hello(), welcome(agent="nope"), {"expect": {"type": "init.failed", "error": {"code": "not_found", "message": "$string"}}}, {"expect_exit": 1}])
for name, v in V.items():
    out = {"name": name, "description": v["description"]}
    if "args" in v: out["args"] = v["args"]
    else: out["agent"] = v.get("agent", "conformance")
    if v.get("auto_ack"): out["auto_ack"] = True
    out["steps"] = v["steps"]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors", name + ".json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
print(len(V))
