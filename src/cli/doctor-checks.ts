// The checks of `codehop doctor` (src/cli/commands/doctor.ts loads this module when it runs).
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { v1Hint } from "../config/endpoint.ts";
import { readEnv } from "../config/env.ts";
import { CodehopError } from "../errors.ts";
import { renderPrompt } from "../prompts/render.ts";
import type { AppConfig } from "../runs/config.ts";

/** One check of `codehop doctor`. */
export interface DoctorCheck {
  /** "endpoint", "models", "completion", "stop_sequences", "latency", "data_dir", "corpus". */
  name: string;
  /** ok; warn (works, but worth a look); fail (codehop will not work); skip (an earlier check failed). */
  status: "ok" | "warn" | "fail" | "skip";
  /** What was found, in a sentence. */
  detail: string;
  /** How long the check took (checks that call the endpoint). */
  duration_ms?: number;
}

/** What `codehop doctor --json` prints. */
export interface DoctorReport {
  /** No check failed. */
  ok: boolean;
  base_url: string | null;
  /** The model codehop would use (CODEHOP_MODEL, else the endpoint's first). */
  model: string | null;
  home: string;
  checks: DoctorCheck[];
}

/** Options of {@link runDoctor}. */
export interface DoctorOptions {
  /** Time limit of each request to the endpoint, ms. */
  timeoutMs: number;
  /** A tiny completion slower than this is a warning (ms). */
  slowMs: number;
}

/** codehop's stop sequences (the agents' defaults, src/core/settings.ts). */
const STOP = ["<end_action>", "Observation:"];
/** The line the stop check asks the model to repeat: a server honouring `stop` cuts it at the marker. */
const STOP_PROBE = "alpha beta <end_action> gamma delta";

/** What the reply to the stop probe says about the endpoint honouring `stop`. */
export function stopVerdict(text: string): Pick<DoctorCheck, "status" | "detail"> {
  const shown = JSON.stringify(text.trim().slice(0, 80));
  if (text.includes("<end_action>") || /gamma|delta/.test(text))
    return {
      status: "fail",
      detail: `the reply went past the stop sequence <end_action> (${shown}): the endpoint ignores "stop", so agents would run past the end of their actions; use a server that honours it (vLLM, llama.cpp, Ollama and OpenAI do)`,
    };
  if (/alpha/.test(text))
    return { status: "ok", detail: `the reply stopped at <end_action> (${shown})` };
  return { status: "warn", detail: `inconclusive: the model did not repeat the line (${shown})` };
}

/** The endpoint's model list (`GET <base>/models`), or a failed check saying why not. */
async function listModels(
  config: AppConfig,
  base: string,
  timeoutMs: number,
): Promise<{ ids: string[] } | { problem: string }> {
  const url = `${base.replace(/\/+$/, "")}/models`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    const why =
      (err as Error).name === "TimeoutError"
        ? `no answer within ${timeoutMs / 1000} s`
        : (cause?.code ?? (err as Error).message);
    return {
      problem: `cannot reach ${url} (${why}): is the server running and OPENAI_BASE_URL right?`,
    };
  }
  const type = res.headers.get("content-type") ?? "";
  const hint = v1Hint(config.baseURL);
  if (/\btext\/html\b/i.test(type)) {
    await res.body?.cancel().catch(() => {});
    return {
      problem: `${url} answered an HTML page (HTTP ${res.status}), not an OpenAI-compatible model list${hint}`,
    };
  }
  const text = await res.text();
  if (!res.ok) {
    let message = text.slice(0, 200);
    try {
      const body = JSON.parse(text);
      message = body?.error?.message ?? body?.message ?? body?.detail ?? message;
    } catch {
      // not JSON: the text itself
    }
    return {
      problem: `${url} answered HTTP ${res.status}: ${String(message).trim() || "(no message)"}${res.status === 404 ? hint : ""}`,
    };
  }
  try {
    const body = JSON.parse(text) as { data?: Array<{ id?: unknown }> };
    return {
      ids: (body.data ?? [])
        .map((m) => m.id)
        .filter((id): id is string => typeof id === "string" && id.length > 0),
    };
  } catch {
    return { problem: `${url} answered HTTP ${res.status} with a body that is not JSON${hint}` };
  }
}

/** Where the data directory stands: usable, or why not. */
async function dataDirCheck(home: string): Promise<DoctorCheck> {
  const name = "data_dir";
  if (existsSync(home) && !statSync(home).isDirectory())
    return {
      name,
      status: "fail",
      detail: `${home} is not a directory (set CODEHOP_HOME or --home)`,
    };
  if (!existsSync(home)) {
    // Created on the first run: its nearest existing parent must be writable.
    let parent = dirname(home);
    while (!existsSync(parent) && dirname(parent) !== parent) parent = dirname(parent);
    try {
      accessSync(parent, constants.W_OK);
      return { name, status: "ok", detail: `${home} does not exist yet; the first run creates it` };
    } catch {
      return {
        name,
        status: "fail",
        detail: `${home} does not exist and ${parent} is not writable`,
      };
    }
  }
  try {
    accessSync(home, constants.W_OK);
  } catch {
    return { name, status: "fail", detail: `${home} is not writable` };
  }
  const { openPersistence } = await import("../persistence/open.ts");
  const { checkpointDbPath } = await import("../persistence/sqlite-database.ts");
  if (!existsSync(checkpointDbPath(home)))
    return { name, status: "ok", detail: `${home} (no runs yet)` };
  try {
    const p = openPersistence(home, { mustExist: true });
    try {
      const n = (await p.threads.list()).length;
      return { name, status: "ok", detail: `${p.location}: ${n} thread${n === 1 ? "" : "s"}` };
    } finally {
      p.close();
    }
  } catch (err) {
    return { name, status: "fail", detail: (err as Error).message };
  }
}

/** The corpus named by CODEHOP_CORPUS / --corpus opens and has documents. */
async function corpusCheck(corpus: string): Promise<DoctorCheck> {
  const { openCorpusDb } = await import("../store/corpus-db.ts");
  try {
    const db = openCorpusDb(corpus, { readonly: true });
    try {
      const { n } = db.prepare("SELECT count(*) AS n FROM documents").get() as { n: number };
      return {
        name: "corpus",
        status: n > 0 ? "ok" : "warn",
        detail: `${corpus}: ${n} documents${n > 0 ? "" : " (empty: ingest something into it)"}`,
      };
    } finally {
      db.close();
    }
  } catch (err) {
    return { name: "corpus", status: "fail", detail: (err as Error).message };
  }
}

/**
 * The checks that ask the model: a tiny completion, whether the reply stops at codehop's stop
 * sequences, how long the tiny completion took.
 */
async function modelChecks(
  model: string,
  endpoint: { baseURL?: string; apiKey?: string },
  options: DoctorOptions,
): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const skip = (name: string, why: string) => checks.push({ name, status: "skip", detail: why });
  const { callModel, messageText, resolveModel } = await import("../core/models.ts");
  let chat: Awaited<ReturnType<typeof resolveModel>>;
  try {
    chat = await resolveModel("doctor", {
      context: {
        model,
        modelSettings: {
          ...endpoint,
          maxRetries: 0,
          timeoutMs: options.timeoutMs,
          maxTokens: 32,
          temperature: 0,
        },
      },
    } as never);
  } catch (err) {
    checks.push({ name: "completion", status: "fail", detail: (err as Error).message });
    skip("stop_sequences", "no model");
    skip("latency", "no model");
    return checks;
  }
  const ask = async (prompt: string, stop?: string[]) => {
    const t0 = Date.now();
    try {
      const reply = await callModel(chat, [new HumanMessage(prompt)], {
        agentName: "doctor",
        stop,
      });
      return { text: messageText(reply), ms: Date.now() - t0 };
    } catch (err) {
      return {
        error: CodehopError.isInstance(err) ? err.message : String(err),
        ms: Date.now() - t0,
      };
    }
  };
  const tiny = await ask(renderPrompt("doctor/ready.md", {}));
  if ("error" in tiny) {
    checks.push({
      name: "completion",
      status: "fail",
      detail: tiny.error ?? "",
      duration_ms: tiny.ms,
    });
    skip("stop_sequences", "the completion failed");
    skip("latency", "the completion failed");
    return checks;
  }
  checks.push({
    name: "completion",
    status: tiny.text.trim() ? "ok" : "warn",
    detail: tiny.text.trim()
      ? `${model} answered ${JSON.stringify(tiny.text.trim().slice(0, 60))}`
      : `${model} answered with an empty reply`,
    duration_ms: tiny.ms,
  });
  const probe = await ask(renderPrompt("doctor/stop-probe.md", { line: STOP_PROBE }), STOP);
  checks.push({
    name: "stop_sequences",
    ...("error" in probe
      ? { status: "fail" as const, detail: probe.error ?? "" }
      : stopVerdict(probe.text)),
    duration_ms: probe.ms,
  });
  checks.push({
    name: "latency",
    status: tiny.ms > options.slowMs ? "warn" : "ok",
    detail: `${tiny.ms} ms for a tiny completion${tiny.ms > options.slowMs ? ` (over ${options.slowMs / 1000} s: every agent step makes one model call)` : ""}`,
    duration_ms: tiny.ms,
  });
  return checks;
}

/**
 * `doctor` for a `provider:model` name (Anthropic, Google ...): the provider's key and endpoint
 * from its own variables; its model list is not read (each provider lists models its own way);
 * the completion, stop-sequence and latency checks are the same as for an OpenAI-compatible
 * endpoint, through the provider's LangChain client.
 */
async function providerDoctor(
  config: AppConfig,
  named: { provider: string; model: string },
  options: DoctorOptions,
): Promise<DoctorReport> {
  const { providerEndpoint } = await import("../core/provider-names.ts");
  const endpoint = providerEndpoint(named.provider, readEnv());
  const base = endpoint.baseURL ?? endpoint.defaultBaseURL ?? null;
  const checks: DoctorCheck[] = [];
  const keyMissing = endpoint.keyVariable !== undefined && !endpoint.apiKey;
  checks.push({
    name: "endpoint",
    status: keyMissing ? "fail" : "ok",
    detail: keyMissing
      ? `${named.provider}: ${endpoint.keyVariable} is not set`
      : `${named.provider} at ${base ?? "the provider's default endpoint"}${endpoint.baseURL || !endpoint.baseUrlVariable ? "" : ` (${endpoint.baseUrlVariable} unset)`}, key ${endpoint.keyVariable ? "set" : "read by the provider's package"}`,
  });
  checks.push({
    name: "models",
    status: "skip",
    detail: `${named.provider}'s model list is not read; using ${named.provider}:${named.model}`,
  });
  if (keyMissing)
    for (const n of ["completion", "stop_sequences", "latency"])
      checks.push({ name: n, status: "skip", detail: `set ${endpoint.keyVariable}` });
  else checks.push(...(await modelChecks(`${named.provider}:${named.model}`, {}, options)));
  checks.push(await dataDirCheck(config.home));
  if (config.corpus) checks.push(await corpusCheck(config.corpus));
  return {
    ok: !checks.some((c) => c.status === "fail"),
    base_url: base,
    model: `${named.provider}:${named.model}`,
    home: config.home,
    checks,
  };
}

/**
 * Checks what codehop needs from this machine: the model endpoint (its model list, a tiny
 * completion, whether it cuts replies at codehop's stop sequences, how long a tiny completion
 * takes) and the data directory (and the corpus, when one is configured).
 */
export async function runDoctor(config: AppConfig, options: DoctorOptions): Promise<DoctorReport> {
  const checks: DoctorCheck[] = [];
  const skip = (name: string, why: string) => checks.push({ name, status: "skip", detail: why });
  const { parseModelName } = await import("../core/provider-names.ts");
  const named = config.model ? parseModelName(config.model) : undefined;
  if (named && named.provider !== "openai") return providerDoctor(config, named, options);
  const base = config.baseURL ?? "https://api.openai.com/v1";
  let model = config.model;
  if (!config.baseURL && !config.apiKey) {
    checks.push({
      name: "endpoint",
      status: "fail",
      detail:
        "no model endpoint configured: set OPENAI_BASE_URL (e.g. http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for Ollama) or OPENAI_API_KEY for api.openai.com",
    });
    for (const n of ["models", "completion", "stop_sequences", "latency"])
      skip(n, "no endpoint configured");
  } else {
    checks.push({
      name: "endpoint",
      status: "ok",
      detail: `${base}${config.baseURL ? "" : " (OPENAI_BASE_URL unset)"}, key ${config.apiKey ? "set" : "unset (EMPTY is sent)"}`,
    });
    const started = Date.now();
    const listed = await listModels(config, base, options.timeoutMs);
    const duration_ms = Date.now() - started;
    if ("problem" in listed) {
      checks.push({ name: "models", status: "fail", detail: listed.problem, duration_ms });
    } else if (!listed.ids.length) {
      checks.push({
        name: "models",
        status: model ? "warn" : "fail",
        detail: "the endpoint lists no models",
        duration_ms,
      });
    } else {
      const shown = `${listed.ids.slice(0, 5).join(", ")}${listed.ids.length > 5 ? ", …" : ""}`;
      const count = `${listed.ids.length} model${listed.ids.length === 1 ? "" : "s"}: ${shown}`;
      if (!model) {
        model = listed.ids[0];
        checks.push({
          name: "models",
          status: "ok",
          detail: `${count} (CODEHOP_MODEL unset: codehop uses ${model})`,
          duration_ms,
        });
      } else if (!listed.ids.includes(model)) {
        checks.push({
          name: "models",
          status: "warn",
          detail: `${count}; CODEHOP_MODEL=${model} is not among them`,
          duration_ms,
        });
      } else {
        checks.push({
          name: "models",
          status: "ok",
          detail: `${count} (using ${model})`,
          duration_ms,
        });
      }
    }
    if (!model) {
      for (const n of ["completion", "stop_sequences", "latency"])
        skip(n, "no model to ask (set CODEHOP_MODEL)");
    } else {
      checks.push(
        ...(await modelChecks(model, { baseURL: config.baseURL, apiKey: config.apiKey }, options)),
      );
    }
  }
  checks.push(await dataDirCheck(config.home));
  if (config.corpus) checks.push(await corpusCheck(config.corpus));
  return {
    ok: !checks.some((c) => c.status === "fail"),
    base_url: base,
    model: model ?? null,
    home: config.home,
    checks,
  };
}
