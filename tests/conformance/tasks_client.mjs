#!/usr/bin/env node
// Background runs as MCP tasks, against a client nobody here wrote: the official MCP TypeScript
// SDK v2 client (`@modelcontextprotocol/client`) with the Tasks extension's own requester
// (`@modelcontextprotocol/ext-tasks`, its `./client` and `./core/v2` entry points), opening
// `lnk-link-run serve --state ...` over stdio in the 2026-07-28 era.
//
// The SDK client alone cannot carry task traffic (its wire codecs do not know `resultType:
// "task"`), so ext-tasks asks the host for a raw request path beside it (`rawDispatch`) and the
// per-request framing. This script is that host: `tools/call` and `tasks/*` go out through the
// SDK's own stdio transport with request ids of their own, and their answers are taken off the
// transport before the SDK sees them; every other request is the SDK's.
//
// For each negotiation mode (`pin`: `{pin: "2026-07-28"}`, `auto`: probe and fall back) it checks:
//
// - discover: serve declares `io.modelcontextprotocol/tasks`, and `start` has an outputSchema;
// - plain:    a `start` through the SDK alone (no extension declared) is no task: `{id, output}`;
// - complete: `start` of a short program is a task; polled with `tasks/get` it completes, and the
//             result's `structuredContent` validates against `start`'s `outputSchema` (ajv,
//             JSON Schema 2020-12) and holds the program's output and exit code;
// - ids:      `tasks/get` of an unknown and of a malformed id are JSON-RPC errors -32602;
// - cancel:   `start` of `sleep <N>` is a task; `tasks/update` is acknowledged; `tasks/cancel`,
//             then `tasks/get` reaches `cancelled`;
// - restart:  a task started by one serve, handed off, and resumed by a second serve on the same
//             state folder once the first has exited (stdin closed, process gone): `completed`;
// - watch:    `watch` of a run for a line it prints after two seconds is a task of its own, whose
//             id is the run's, `-` and a tag; polled, it completes with the line, and its
//             `structuredContent` validates against `watch`'s `outputSchema`; a second watch,
//             for a line never printed, cancelled, reaches `cancelled` while the run goes on.
//
// Usage:
//   node tasks_client.mjs [--modes pin,auto] [--checks ...] [--expect-ttl-ms N]
//                         [--sleep SECONDS] [--trace FILE] -- <serve command and args>
//
// The packages come from $LNK_CONFORMANCE_MODULES (a node_modules folder; tests/conformance/
// install.sh makes one and prints it), else from a node_modules beside this script. serve must
// have `--state` and allow the programs `sh` and `sleep`. `--trace FILE` appends every line on
// the wire (both directions, each serve process apart) to FILE; a failed check prints its own.
//
// Prints one line per check (`ok` / `FAIL`), `info` lines on what the client sent, and exits 0
// only when every check of every mode passed.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { randomBytes } from "node:crypto";

import { CheckFailed, Wire, alive, check, createdTask, describe, ok, outputSchemaOf, printing, textOf, until } from "./tasks_report.mjs";

const MODERN = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
const PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion";
const MODES = ["pin", "auto"];
const CHECKS = ["discover", "plain", "complete", "ids", "cancel", "restart", "watch"];
// Environment passed on to serve on top of what the SDK itself lets through.
const PASSED_ENV = ["RUST_LOG", "RUST_BACKTRACE", "LNK_SUPERVISE", "LNK_KEYRING", "XDG_CONFIG_HOME"];
const CLIENT_INFO = { name: "lnk-tasks-conformance", version: "1.0.0" };
// The same endpoint for every serve of one state folder: a task reference is resumable there.
const ENDPOINT = "lnk-link-run-serve";
const RUN_ID = /^[a-z0-9]{12,32}$/;
const CHECK_DEADLINE_MS = 90_000;
const REQUEST_TIMEOUT_MS = 30_000;

// ------------------------------------------------------------------------------------------
// Arguments and packages.

function parseArgs(argv) {
    const args = { modes: MODES, checks: CHECKS, expectTtlMs: null, sleep: "600", trace: null, command: [] };
    for (let i = 0; i < argv.length; i += 1) {
        const arg = argv[i];
        const value = () => {
            i += 1;
            if (i >= argv.length) throw new Error(`${arg} needs a value`);
            return argv[i];
        };
        if (arg === "--") {
            args.command = argv.slice(i + 1);
            break;
        } else if (arg === "--modes") args.modes = value().split(",").filter(Boolean);
        else if (arg === "--checks") args.checks = value().split(",").filter(Boolean);
        else if (arg === "--expect-ttl-ms") args.expectTtlMs = Number(value());
        else if (arg === "--sleep") args.sleep = value();
        else if (arg === "--trace") args.trace = value();
        else throw new Error(`unknown argument ${arg}`);
    }
    for (const mode of args.modes) if (!MODES.includes(mode)) throw new Error(`unknown mode ${mode}; known: ${MODES}`);
    for (const name of args.checks) if (!CHECKS.includes(name)) throw new Error(`unknown check ${name}; known: ${CHECKS}`);
    if (args.command.length === 0) throw new Error("no serve command: give it after --");
    return args;
}

const modules =
    process.env.LNK_CONFORMANCE_MODULES || join(dirname(fileURLToPath(import.meta.url)), "node_modules");

// An ES module import from `modules`, which need not lie beside this script: the package's
// `exports` (its `import` or `default` condition) or, without them, the path as written.
async function load(specifier) {
    const parts = specifier.split("/");
    const nameLength = specifier.startsWith("@") ? 2 : 1;
    const name = parts.slice(0, nameLength).join("/");
    const subpath = parts.length > nameLength ? `./${parts.slice(nameLength).join("/")}` : ".";
    const folder = join(modules, name);
    const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));
    let target;
    if (manifest.exports !== undefined) {
        let entry = typeof manifest.exports === "string" && subpath === "." ? manifest.exports : manifest.exports[subpath];
        while (entry !== undefined && typeof entry === "object") entry = entry.import ?? entry.default;
        if (typeof entry !== "string") throw new Error(`${name} does not export ${subpath}`);
        target = entry;
    } else {
        target = subpath === "." ? (manifest.module ?? manifest.main ?? "index.js") : subpath;
    }
    return import(pathToFileURL(join(folder, target)).href);
}

function version(name) {
    return JSON.parse(readFileSync(join(modules, name, "package.json"), "utf8")).version;
}

// ------------------------------------------------------------------------------------------
// One serve: the SDK client, and the host's raw request path beside it for ext-tasks.

let sdk;
let tasks;
let tasksV2;
let Ajv2020;
// The close of every serve still open, so that a check that ran out of time leaves none behind.
const openServes = new Set();

async function openServe(mode, command, wire, label) {
    const env = {};
    for (const key of PASSED_ENV) if (process.env[key] !== undefined) env[key] = process.env[key];
    const transport = new sdk.stdio.StdioClientTransport({
        command: command[0],
        args: command.slice(1),
        env,
        stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk) => {
        for (const line of String(chunk).split("\n")) if (line) wire.note(label, "(stderr)", line);
    });
    // Every line the SDK writes, the connect-time ones included (the discover probe runs on a
    // short-lived sibling process the SDK spawns from the same command; it is not seen here).
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        wire.note(label, "-->", message);
        return send(message, options);
    };
    const client = new sdk.client.Client(CLIENT_INFO, {
        versionNegotiation: { mode: mode === "pin" ? { pin: MODERN } : "auto" },
    });
    await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
    const pid = transport.pid;
    wire.note(label, "---", `connected to pid ${pid}, era ${client.getProtocolEra()} ${client.getNegotiatedProtocolVersion()}; discover (on the probe sibling): ${JSON.stringify(client.getDiscoverResult() ?? null)}`);

    // The host's request coordinator: ids of its own ("lnk-<n>"; the SDK's are integers), and
    // answers to them taken off the transport before the SDK's handler sees them.
    const pending = new Map();
    let next = 0;
    const sdkOnMessage = transport.onmessage;
    transport.onmessage = (message, extra) => {
        wire.note(label, "<--", message);
        const isResponse = message !== null && typeof message === "object" && !("method" in message) && "id" in message;
        if (isResponse && pending.has(message.id)) {
            const settle = pending.get(message.id);
            pending.delete(message.id);
            settle(message);
            return;
        }
        sdkOnMessage?.(message, extra);
    };
    const sdkOnClose = transport.onclose;
    transport.onclose = () => {
        wire.note(label, "---", "the connection closed");
        for (const settle of pending.values()) settle(null);
        pending.clear();
        sdkOnClose?.();
    };
    const rawDispatch = (request, options = {}) =>
        new Promise((resolve, reject) => {
            next += 1;
            const id = `lnk-${next}`;
            const limit = options.context?.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
            const timer = setTimeout(() => {
                pending.delete(id);
                reject(new Error(`no answer to ${request.method} within ${limit} ms`));
            }, limit);
            const onAbort = () => {
                clearTimeout(timer);
                pending.delete(id);
                reject(options.signal.reason ?? new Error("aborted"));
            };
            options.signal?.addEventListener("abort", onAbort, { once: true });
            pending.set(id, (message) => {
                clearTimeout(timer);
                options.signal?.removeEventListener("abort", onAbort);
                if (message === null) reject(new Error(`the connection closed before an answer to ${request.method}`));
                else if ("error" in message) resolve({ kind: "error", error: message.error });
                else resolve({ kind: "result", result: message.result });
            });
            transport.send({ jsonrpc: "2.0", id, ...request }).catch((error) => {
                clearTimeout(timer);
                pending.delete(id);
                reject(error);
            });
        });

    const session = tasks.createTaskSessionFromClient(client, {
        endpointId: ENDPOINT,
        rawDispatch,
        v2RequestFraming: {
            protocolVersion: client.getNegotiatedProtocolVersion(),
            clientInfo: CLIENT_INFO,
            clientCapabilities: {},
        },
        onError: (error) => wire.note(label, "(ext-tasks)", describe(error)),
    });
    const close = async () => {
        openServes.delete(close);
        await session.close().catch(() => {});
        await client.close().catch(() => {});
    };
    openServes.add(close);
    return { client, session, transport, pid, close };
}

// The checks a completed task's result must pass: the ext-tasks codec already parsed it as a
// 2026-07-28 CallToolResult; the structured value must validate against `start`'s outputSchema.
function checkCompleted(tag, what, outcome, validate, taskId, marker, code, wire) {
    if (outcome.status !== "completed") rawNotes(tag, wire, taskId, validate);
    check(tag, `${what}: the task completed`, outcome.status === "completed", outcome.status === "failed" ? `failed: ${describe(outcome.error)}` : outcome);
    const result = outcome.result;
    check(tag, `${what}: the result is no error`, result.isError !== true, result);
    const structured = result.structuredContent;
    check(tag, `${what}: the result has structuredContent`, structured !== null && typeof structured === "object", result);
    const valid = validate(structured);
    check(tag, `${what}: structuredContent validates against start's outputSchema`, valid, { errors: validate.errors, structuredContent: structured });
    check(tag, `${what}: structuredContent is the run (id ${taskId})`, structured.id === taskId, structured);
    check(tag, `${what}: structuredContent has exit code ${code}`, structured.exit_code === code && structured.signal === null, structured);
    check(tag, `${what}: structuredContent's state is exited`, structured.state === "exited", structured);
    check(tag, `${what}: structuredContent holds the program's output`, typeof structured.output === "string" && structured.output.includes(`${marker}-out`) && structured.output.includes(`${marker}-err`), structured);
    check(tag, `${what}: the text holds the output and the exit`, textOf(result).includes(`${marker}-out`) && textOf(result).includes(String(code)), textOf(result));
}

// When ext-tasks did not settle a task as completed: what the last `completed` answer on the
// wire holds, checked as far as it goes, so that one report names every fault at once.
function rawNotes(tag, wire, taskId, validate) {
    const answer = wire.lines
        .map((line) => line.match(/ <-- (\{.*\})$/))
        .filter(Boolean)
        .map((match) => JSON.parse(match[1]).result)
        .filter((result) => result?.taskId === taskId && result.status === "completed")
        .at(-1);
    if (answer === undefined) return;
    const result = answer.result ?? {};
    const note = (text) => console.log(`note [${tag}] (raw completed answer) ${text}`);
    note(`result.resultType: ${JSON.stringify(result.resultType)} (a 2026-07-28 CallToolResult carries "complete")`);
    note(`result passes ext-tasks' CallToolResult schema: ${tasksV2.CallToolResultV2Schema.safeParse(result).success}`);
    const valid = validate(result.structuredContent);
    note(`result.structuredContent validates against start's outputSchema: ${valid}${valid ? "" : ` ${JSON.stringify(validate.errors)}`}`);
}

// ------------------------------------------------------------------------------------------
// The checks. Each opens its own serve(s) and closes them.

async function withServe(mode, args, wire, label, body) {
    const serve = await openServe(mode, args.command, wire, label);
    try {
        return await body(serve);
    } finally {
        await serve.close();
    }
}

async function schemaOf(serve, name) {
    const { tools } = await serve.client.listTools();
    const schema = outputSchemaOf(tools, name);
    if (schema === undefined) throw new CheckFailed(`${name} has no outputSchema: ${JSON.stringify(tools.map((t) => t.name))}`);
    return new Ajv2020({ strict: false, allErrors: true }).compile(schema);
}

async function startSchema(serve) {
    const { tools } = await serve.client.listTools();
    const schema = outputSchemaOf(tools, "start");
    if (schema === undefined) throw new CheckFailed(`start has no outputSchema: ${JSON.stringify(tools.map((t) => t.name))}`);
    return new Ajv2020({ strict: false, allErrors: true }).compile(schema);
}

const checks = {
    async discover(mode, args, wire, tag) {
        await withServe(mode, args, wire, "serve", async (serve) => {
            check(tag, `the connection is in the ${MODERN} era`, serve.client.getProtocolEra() === "modern" && serve.client.getNegotiatedProtocolVersion() === MODERN, serve.client.getNegotiatedProtocolVersion());
            const extensions = serve.client.getServerCapabilities()?.extensions ?? {};
            check(tag, `server/discover declares ${TASKS} as {}`, JSON.stringify(extensions[TASKS]) === "{}", serve.client.getServerCapabilities());
            check(tag, "ext-tasks sees a V2 (2026-07-28) tasks server", serve.session.capabilities.execution === true && serve.session.capabilities.cancellation === true, serve.session.capabilities);
            const { tools } = await serve.client.listTools();
            check(tag, "start, list, read and stop are listed", ["start", "list", "read", "stop"].every((n) => tools.some((t) => t.name === n)), tools.map((t) => t.name));
            check(tag, "start has an outputSchema", outputSchemaOf(tools, "start") !== undefined);
        });
    },

    async plain(mode, args, wire, tag) {
        await withServe(mode, args, wire, "serve", async (serve) => {
            await serve.client.listTools();
            // The SDK alone validates structuredContent against the outputSchema it listed.
            const result = await serve.client.callTool({ name: "start", arguments: { program: "sh", args: ["-c", "exit 0"] } });
            const structured = result.structuredContent;
            check(tag, "a start without the extension declared is answered with {id, output}", structured && RUN_ID.test(structured.id ?? "") && typeof structured.output === "string" && result.taskId === undefined && result.resultType !== "task", result);
            const call = wire.sent("tools/call").at(-1);
            const declared = call?.params?._meta?.[CAPABILITIES]?.extensions?.[TASKS] !== undefined;
            check(tag, "(that start did not declare the extension)", !declared, call);
        });
    },

    async complete(mode, args, wire, tag) {
        await withServe(mode, args, wire, "serve", async (serve) => {
            const validate = await startSchema(serve);
            const marker = `tasks${randomBytes(6).toString("hex")}`;
            const execution = await serve.session.callTool("start", { program: "sh", args: printing(marker, 1, 3) });
            check(tag, "start of a short program is answered with a task", execution.kind === "task", execution.kind);
            const taskId = execution.handle.taskId;
            check(tag, `the task id is the run id (${taskId})`, RUN_ID.test(taskId), taskId);
            const created = createdTask(wire);
            check(tag, "the CreateTaskResult passes ext-tasks' CreateTaskResult schema", tasksV2.CreateTaskResultV2Schema.safeParse(created).success, created);
            check(tag, "the CreateTaskResult is working, with a one-line statusMessage", created.status === "working" && typeof created.statusMessage === "string" && created.statusMessage.length > 0 && !created.statusMessage.includes("\n"), created);
            check(tag, "createdAt and lastUpdatedAt are dates", !Number.isNaN(Date.parse(created.createdAt)) && !Number.isNaN(Date.parse(created.lastUpdatedAt)), created);
            if (args.expectTtlMs !== null) check(tag, `ttlMs is the background timeout + keep (${args.expectTtlMs})`, created.ttlMs === args.expectTtlMs, created.ttlMs);
            else check(tag, "ttlMs is a positive integer", Number.isInteger(created.ttlMs) && created.ttlMs > 0, created.ttlMs);
            check(tag, "pollIntervalMs is a positive integer", Number.isInteger(created.pollIntervalMs) && created.pollIntervalMs > 0, created.pollIntervalMs);

            const seen = [];
            const { outcome } = await execution.settle({
                signal: AbortSignal.timeout(60_000),
                onEvent: (event) => {
                    if (event.type === "task") seen.push(event.task.status);
                },
            });
            ok(tag, `statuses seen while polling: ${seen.join(" -> ")}`);
            check(tag, "tasks/get was polled", wire.sent("tasks/get").length > 0);
            checkCompleted(tag, "start", outcome, validate, taskId, marker, 3, wire);
        });
    },

    async ids(mode, args, wire, tag) {
        await withServe(mode, args, wire, "serve", async (serve) => {
            for (const [what, id] of [["an unknown id", "zzzzzzzzzzzz0000"], ["a malformed id", "../../etc/passwd"]]) {
                let error;
                try {
                    await serve.session.task(id).snapshot();
                } catch (caught) {
                    error = caught;
                }
                check(tag, `tasks/get of ${what} is a JSON-RPC error -32602`, error instanceof tasks.JsonRpcResponseError && error.code === -32602, error === undefined ? "it resolved" : describe(error));
            }
        });
    },

    async cancel(mode, args, wire, tag) {
        await withServe(mode, args, wire, "serve", async (serve) => {
            const execution = await serve.session.callTool("start", { program: "sleep", args: [args.sleep] });
            check(tag, `start of sleep ${args.sleep} is answered with a task`, execution.kind === "task", execution.kind);
            const taskId = execution.handle.taskId;
            const controller = serve.session.task(taskId);
            const first = await controller.snapshot();
            check(tag, "tasks/get says working", first.status === "working", first.raw);
            check(tag, "its statusMessage is one line", typeof first.statusMessage === "string" && first.statusMessage.length > 0 && !first.statusMessage.includes("\n"), first.raw);
            await controller.update({});
            ok(tag, "tasks/update is acknowledged");
            await execution.cancel();
            ok(tag, "tasks/cancel is acknowledged");
            const outcome = await execution.result();
            check(tag, "ext-tasks settles the execution as cancelled", outcome.status === "cancelled", outcome);
            const last = await until("tasks/get reaches cancelled", 15_000, async () => {
                const view = await controller.snapshot();
                if (view.status === "working") {
                    // At the server's pace (its hint, at least 250 ms apart).
                    const pause = Math.min(Math.max(view.suggestedPollIntervalMs ?? 1000, 250), 1000);
                    await new Promise((resolve) => setTimeout(resolve, pause));
                    return null;
                }
                return view;
            });
            check(tag, "tasks/get reaches cancelled", last.status === "cancelled", last.raw);
        });
    },

    async restart(mode, args, wire, tag) {
        const marker = `restart${randomBytes(6).toString("hex")}`;
        let saved;
        let taskId;
        const first = await openServe(mode, args.command, wire, "serve-1");
        try {
            const execution = await first.session.callTool("start", { program: "sh", args: printing(marker, 5, 0) });
            check(tag, "the first serve answers start with a task", execution.kind === "task", execution.kind);
            taskId = execution.handle.taskId;
            // What a host keeps across its own restart: the task reference, as JSON.
            await execution.handoff((reference) => {
                saved = JSON.stringify(reference);
            });
            // Closing the session cancels every execution it still owns, and a handed-off one
            // is released only once its outcome (closed, locally) has settled: wait for that,
            // or the close sends tasks/cancel for the task just handed off.
            await execution.result();
            await new Promise((resolve) => setImmediate(resolve));
            ok(tag, `the task is handed off: ${saved}`);
        } finally {
            await first.close();
        }
        await until("the first serve exits once its stdin is closed", 10_000, () => !alive(first.pid));
        ok(tag, `the first serve (pid ${first.pid}) is gone`);

        await withServe(mode, args, wire, "serve-2", async (second) => {
            const validate = await startSchema(second);
            const execution = await second.session.resumeTask(JSON.parse(saved));
            check(tag, "the second serve resumes the task", execution.kind === "task" && execution.handle.taskId === taskId, execution.handle);
            const firstAnswer = wire.lines.find((line) => line.includes(" serve-2 <-- ") && line.includes(`"taskId":"${taskId}"`));
            check(tag, "the second serve first sees it working (the run outlived the first serve)", firstAnswer?.includes('"status":"working"'), firstAnswer);
            const { outcome } = await execution.settle({ signal: AbortSignal.timeout(60_000) });
            checkCompleted(tag, "the resumed task", outcome, validate, taskId, marker, 0, wire);
        });
    },

    async watch(mode, args, wire, tag) {
        await withServe(mode, args, wire, "serve", async (serve) => {
            const validate = await schemaOf(serve, "watch");
            // As serve listed it (the SDK's own view of a tool keeps no `execution`).
            const listed = wire.lines
                .map((line) => line.match(/ <-- (\{.*\})$/))
                .filter(Boolean)
                .map((match) => JSON.parse(match[1]).result?.tools)
                .filter(Array.isArray)
                .at(-1);
            const declared = listed?.find((t) => t.name === "watch");
            check(tag, "watch is listed with execution.taskSupport: required", declared?.execution?.taskSupport === "required", declared?.execution);
            const marker = `watch${randomBytes(6).toString("hex")}`;
            // The run prints `<marker>-ready` after two seconds: the marker is in its arguments,
            // the line is not.
            const run = await serve.session.callTool("start", {
                program: "sh",
                args: ["-c", `sleep 2; printf '%s-%s\\n' "$1" ready; sleep 3`, "sh", marker],
            });
            check(tag, "the run is a task", run.kind === "task", run.kind);
            const runId = run.handle.taskId;
            const watch = await serve.session.callTool("watch", { id: runId, until: `${marker}-ready` });
            check(tag, "watch is answered with a task", watch.kind === "task", watch.kind);
            const watchId = watch.handle.taskId;
            check(tag, `the watch's id is the run's, "-" and a tag (${watchId})`, new RegExp(`^${runId}-[a-z0-9]{8,16}$`).test(watchId), watchId);
            const never = await serve.session.callTool("watch", { id: runId, until: "never printed" });
            check(tag, "a second watch is a task of its own", never.kind === "task" && never.handle.taskId !== watchId, never.handle);

            const seen = [];
            const { outcome } = await watch.settle({
                signal: AbortSignal.timeout(60_000),
                onEvent: (event) => {
                    if (event.type === "task") seen.push(event.task.status);
                },
            });
            ok(tag, `watch statuses seen while polling: ${seen.join(" -> ")}`);
            check(tag, "the watch completed", outcome.status === "completed", outcome.status === "failed" ? describe(outcome.error) : outcome);
            const structured = outcome.result?.structuredContent;
            check(tag, "the watch's result is no error", outcome.result?.isError !== true, outcome.result);
            check(tag, "its structuredContent validates against watch's outputSchema", validate(structured), { errors: validate.errors, structuredContent: structured });
            check(tag, "it holds the line", structured.matched === true && structured.line === `${marker}-ready`, structured);
            check(tag, "the text holds the line", textOf(outcome.result).includes(`${marker}-ready`), textOf(outcome.result));

            await never.cancel();
            const cancelled = await never.result();
            check(tag, "a cancelled watch settles as cancelled", cancelled.status === "cancelled", cancelled);
            const view = await serve.session.task(never.handle.taskId).snapshot();
            check(tag, "tasks/get of the cancelled watch says cancelled", view.status === "cancelled", view.raw);
            const runView = await serve.session.task(runId).snapshot();
            check(tag, "the run goes on (or ended by itself), not cancelled", runView.status !== "cancelled", runView.raw);
            const { outcome: ran } = await run.settle({ signal: AbortSignal.timeout(60_000) });
            check(tag, "the run completed by itself", ran.status === "completed", ran);
        });
    },
};

// What the client put in `_meta` of each kind of request it sent, for the report.
function declarations(wire, tag) {
    for (const method of ["server/discover", "tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel"]) {
        const sent = wire.sent(method);
        if (sent.length === 0) continue;
        const kinds = new Set(
            sent.map((message) => {
                const meta = message.params?._meta ?? {};
                const extension = meta[CAPABILITIES]?.extensions?.[TASKS] !== undefined;
                return `${meta[PROTOCOL_VERSION] ?? "no protocolVersion"}, ${extension ? "declares" : "does not declare"} ${TASKS}`;
            }),
        );
        console.log(`info [${tag}] ${method} (${sent.length} sent): ${[...kinds].join(" | ")}`);
    }
}

// ------------------------------------------------------------------------------------------

async function main() {
    let args;
    try {
        args = parseArgs(process.argv.slice(2));
    } catch (error) {
        console.error(`tasks_client.mjs: ${error.message}`);
        return 2;
    }
    try {
        sdk = { client: await load("@modelcontextprotocol/client"), stdio: await load("@modelcontextprotocol/client/stdio") };
        tasks = await load("@modelcontextprotocol/ext-tasks/client");
        tasksV2 = await load("@modelcontextprotocol/ext-tasks/core/v2");
        Ajv2020 = (await load("ajv/dist/2020.js")).default;
    } catch (error) {
        console.error(`tasks_client.mjs: cannot load the packages from ${modules}: ${describe(error)}`);
        return 2;
    }
    console.log(
        `node ${process.versions.node}, @modelcontextprotocol/client ${version("@modelcontextprotocol/client")}, ` +
            `@modelcontextprotocol/ext-tasks ${version("@modelcontextprotocol/ext-tasks")}, ajv ${version("ajv")}`,
    );
    console.log(`serve: ${args.command.join(" ")}`);

    const failed = [];
    for (const mode of args.modes) {
        for (const name of args.checks) {
            const tag = `${mode} ${name}`;
            const wire = new Wire(tag, args.trace);
            let timer;
            try {
                await Promise.race([
                    checks[name](mode, args, wire, tag),
                    new Promise((_, reject) => {
                        timer = setTimeout(() => reject(new CheckFailed(`no end within ${CHECK_DEADLINE_MS} ms`)), CHECK_DEADLINE_MS);
                    }),
                ]);
                declarations(wire, tag);
            } catch (error) {
                failed.push(tag);
                console.log(`FAIL [${tag}] ${error instanceof CheckFailed ? error.message : `the client raised ${describe(error)}`}`);
                if (!(error instanceof CheckFailed) && error?.stack) console.error(error.stack);
                declarations(wire, tag);
                console.log(`---- wire of [${tag}] (--> client to serve, <-- serve to client)`);
                for (const line of wire.lines) console.log(line);
                console.log(`---- end of the wire of [${tag}]`);
            } finally {
                clearTimeout(timer);
                await Promise.all([...openServes].map((close) => close()));
            }
        }
    }
    if (failed.length > 0) {
        console.log(`FAILED: ${failed.join(", ")}`);
        return 1;
    }
    console.log(`all checks passed in modes: ${args.modes.join(", ")}`);
    return 0;
}

// Exits even when a check that ran out of time left a request pending.
process.exit(await main());
