// The reporting of the Tasks conformance checks (`tasks_client.mjs`): one `ok` line per check
// that held, a `CheckFailed` for one that did not, an error described in one line, what a check
// saw on the wire; and the small helpers the checks share (a process alive, a wait, a result's
// text, a tool's outputSchema, a program that prints a marker).
import { readFileSync, appendFileSync } from "node:fs";

export class CheckFailed extends Error {}

export function ok(tag, what) {
    console.log(`ok   [${tag}] ${what}`);
}

export function check(tag, what, condition, detail) {
    if (!condition) throw new CheckFailed(detail === undefined ? what : `${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    ok(tag, what);
}

export function describe(error) {
    if (!(error instanceof Error)) return String(error);
    // A schema error's message is its issues, pretty-printed: one line of them is enough.
    let text = error.issues !== undefined ? `${error.name}: ${JSON.stringify(error.issues)}` : `${error.name}: ${error.message}`;
    if (error.code !== undefined) text += ` (code ${error.code})`;
    if (error.data !== undefined) text += ` data ${JSON.stringify(error.data)}`;
    if (error.cause !== undefined) text += ` <- ${describe(error.cause)}`;
    return text;
}

// What one check saw on the wire, for its failure report (and `--trace`).
export class Wire {
    constructor(tag, trace) {
        this.tag = tag;
        this.trace = trace;
        this.lines = [];
        this.start = Date.now();
    }

    note(serve, direction, message) {
        const text = typeof message === "string" ? message : JSON.stringify(message);
        const line = `${((Date.now() - this.start) / 1000).toFixed(3).padStart(8)} ${serve} ${direction} ${text}`;
        this.lines.push(line);
        if (this.trace) appendFileSync(this.trace, `[${this.tag}] ${line}\n`);
    }

    sent(method) {
        return this.lines
            .map((line) => line.match(/ --> (\{.*\})$/))
            .filter(Boolean)
            .map((match) => JSON.parse(match[1]))
            .filter((message) => message.method === method);
    }
}

// The raw CreateTaskResult of the last tools/call, from the wire.
export function createdTask(wire) {
    const answers = wire.lines
        .map((line) => line.match(/ <-- (\{.*\})$/))
        .filter(Boolean)
        .map((match) => JSON.parse(match[1]))
        .filter((message) => message.result?.resultType === "task");
    return answers.at(-1)?.result ?? null;
}

export function alive(pid) {
    try {
        process.kill(pid, 0);
    } catch (error) {
        return error.code !== "ESRCH";
    }
    // A zombie still answers kill(0): its cmdline reads empty.
    try {
        return readFileSync(`/proc/${pid}/cmdline`).length > 0;
    } catch {
        return false;
    }
}

export async function until(what, limitMs, probe) {
    const deadline = Date.now() + limitMs;
    for (;;) {
        const value = await probe();
        if (value) return value;
        if (Date.now() > deadline) throw new CheckFailed(`${what}: not within ${limitMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
}

export function textOf(result) {
    return (result.content ?? []).map((block) => block.text ?? "").join("\n");
}

export function outputSchemaOf(tools, name) {
    const tool = tools.find((t) => t.name === name);
    return tool?.outputSchema;
}

// A shell program whose output names a marker that is not in its arguments as such.
export function printing(marker, seconds, code) {
    return [
        "-c",
        `sleep ${seconds}; printf '%s-%s\\n' "$1" out; printf '%s-%s\\n' "$1" err >&2; exit ${code}`,
        "sh",
        marker,
    ];
}
