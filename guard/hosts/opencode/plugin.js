// openoxide-guard: written by `guard install opencode`; `guard uninstall opencode` removes it.
// Every tool call OpenCode is about to run is sent to guard's hook (the same command
// Claude Code, Codex and Gemini CLI run), payload on stdin. A deny, an answer guard
// cannot read, a crash or a timeout all throw: the call does not run (fail closed).
import { spawn } from "node:child_process";

const GUARD_HOOK = "__GUARD_HOOK_COMMAND__";
const TIMEOUT_MS = 30000;

function runHook(payload) {
  return new Promise((resolve, reject) => {
    let child;
    try {
      child = spawn("/bin/sh", ["-c", GUARD_HOOK], { stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      reject(new Error(`guard (fail-closed): cannot start guard's hook: ${e.message}`));
      return;
    }
    let out = "";
    let err = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`guard (fail-closed): guard's hook gave no answer in ${TIMEOUT_MS} ms`));
    }, TIMEOUT_MS);
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { err += d; });
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`guard (fail-closed): guard's hook failed: ${e.message}`));
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

export const OpenOxideGuard = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const payload = {
      hook_event_name: "tool.execute.before",
      tool_name: input.tool,
      tool_input: output.args ?? {},
      cwd: directory,
      session_id: input.sessionID,
      tool_use_id: input.callID,
    };
    const { code, out, err } = await runHook(payload);
    if (code === 2) throw new Error(err.trim() || "guard: blocked");
    if (code !== 0) {
      throw new Error(`guard (fail-closed): guard's hook exited ${code}: ${err.trim()}`);
    }
    let answer;
    try {
      answer = JSON.parse(out);
    } catch {
      throw new Error(`guard (fail-closed): unreadable answer from guard: ${out.slice(0, 200)}`);
    }
    if (answer === null || typeof answer !== "object") {
      throw new Error(`guard (fail-closed): unreadable answer from guard: ${out.slice(0, 200)}`);
    }
    if (answer.decision === "deny") throw new Error(answer.reason || "guard: denied");
    if (answer.decision !== "allow") {
      throw new Error(`guard (fail-closed): unknown decision ${JSON.stringify(answer.decision)}`);
    }
    if (answer.args !== undefined) {
      if (answer.args === null || typeof answer.args !== "object") {
        throw new Error("guard (fail-closed): guard's rewritten arguments are not an object");
      }
      for (const [key, value] of Object.entries(answer.args)) output.args[key] = value;
    }
  },
  // The tool ran: guard checks it had decided it (a call it never saw is `hook_missed`)
  // and hands what it says to the model with the tool's output, and to the user.
  "tool.execute.after": async (input, output) => {
    const payload = {
      hook_event_name: "tool.execute.after",
      tool_name: input.tool,
      tool_input: input.args ?? {},
      cwd: directory,
      session_id: input.sessionID,
      tool_use_id: input.callID,
    };
    let message;
    try {
      const { code, out, err } = await runHook(payload);
      message = code === 0 ? JSON.parse(out).message : `guard: ${err.trim() || `exit ${code}`}`;
    } catch (e) {
      message = `guard (fail-closed): guard's post-tool hook failed: ${e.message}`;
    }
    if (typeof message === "string" && message) {
      console.error(message);
      if (output && typeof output.output === "string") output.output += `\n\n${message}`;
    }
  },
});
