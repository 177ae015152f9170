import { gunzipSync } from "node:zlib";
import Fastify, { type FastifyInstance } from "fastify";

/**
 * Local stand-ins for the two places traces go, for tests and benchmarks: a LangSmith API that
 * records the runs its client posts, and an OTLP/HTTP receiver that records the spans an exporter
 * sends. Only what is outside the machine is simulated: LangSmith's own client and OpenTelemetry's
 * own exporter talk real HTTP to them.
 */

/** A LangSmith run as recorded: its post merged with its patches. */
export interface RecordedRun {
  id: string;
  name: string;
  run_type: string;
  parent_run_id?: string;
  trace_id: string;
  dotted_order?: string;
  session_name?: string;
  inputs?: Record<string, unknown>;
  outputs?: Record<string, unknown>;
  error?: string;
  end_time?: unknown;
  extra?: { metadata?: Record<string, unknown> };
  tags?: string[];
  [key: string]: unknown;
}

function merge(runs: Map<string, RecordedRun>, id: string, part: Record<string, unknown>): void {
  runs.set(id, { ...(runs.get(id) ?? ({ id } as RecordedRun)), ...part } as RecordedRun);
}

/**
 * A LangSmith API that records runs: `GET /info`, `POST /runs/multipart` (the client's default:
 * multipart parts `post.<id>`, `patch.<id>`, `post.<id>.inputs` ..., gzip-encoded or not),
 * `POST /runs/batch`, `POST /runs`, `PATCH /runs/:id`. Every request's `x-api-key` is kept.
 */
export class LangSmithRecorder {
  readonly runs = new Map<string, RecordedRun>();
  /** The `x-api-key` of every ingest request. */
  readonly apiKeys: string[] = [];
  url = "";
  private readonly app: FastifyInstance;

  private constructor() {
    this.app = Fastify({
      logger: false,
      bodyLimit: 100 * 1024 * 1024,
      forceCloseConnections: true,
    });
    this.app.addContentTypeParser(
      /^multipart\/form-data/,
      { parseAs: "buffer" },
      (_req, body, done) => done(null, body),
    );
    const key = (headers: Record<string, unknown>) =>
      this.apiKeys.push(String(headers["x-api-key"] ?? ""));
    this.app.get("/info", async () => ({ version: "0.0.0-recorder", instance_flags: {} }));
    this.app.post("/runs/multipart", async (req) => {
      key(req.headers);
      let body = req.body as Buffer;
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      const form = await new Response(new Uint8Array(body), {
        headers: { "content-type": String(req.headers["content-type"]) },
      }).formData();
      for (const [name, value] of form.entries()) {
        const m = /^(post|patch)\.([^.]+)(?:\.(\w+))?$/.exec(name);
        if (!m) continue;
        const text = typeof value === "string" ? value : await value.text();
        const parsed = JSON.parse(text);
        merge(this.runs, m[2], m[3] ? { [m[3]]: parsed } : parsed);
      }
      return {};
    });
    this.app.post("/runs/batch", async (req) => {
      key(req.headers);
      const b = req.body as { post?: RecordedRun[]; patch?: RecordedRun[] };
      for (const r of [...(b.post ?? []), ...(b.patch ?? [])]) merge(this.runs, r.id, r);
      return {};
    });
    this.app.post("/runs", async (req) => {
      key(req.headers);
      const r = req.body as RecordedRun;
      merge(this.runs, r.id, r);
      return {};
    });
    this.app.patch<{ Params: { id: string } }>("/runs/:id", async (req) => {
      key(req.headers);
      merge(this.runs, req.params.id, req.body as Record<string, unknown>);
      return {};
    });
  }

  static async start(): Promise<LangSmithRecorder> {
    const r = new LangSmithRecorder();
    r.url = (await r.app.listen({ host: "127.0.0.1", port: 0 })).replace("localhost", "127.0.0.1");
    return r;
  }

  /** Recorded runs, oldest first by dotted order (a trace's root first). */
  list(): RecordedRun[] {
    return [...this.runs.values()].sort((a, b) =>
      String(a.dotted_order ?? "").localeCompare(String(b.dotted_order ?? "")),
    );
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}

/** A span as an OTLP/JSON exporter sends it, its attributes flattened to values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status?: { code?: number; message?: string };
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  /** `service.name` of the span's resource. */
  service?: string;
}

function anyValue(v: Record<string, any> | undefined): unknown {
  if (!v) return undefined;
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue;
  if ("arrayValue" in v) return (v.arrayValue?.values ?? []).map(anyValue);
  return undefined;
}

function flatten(list: Array<{ key: string; value: Record<string, any> }> | undefined) {
  return Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));
}

/** An OTLP/HTTP receiver for JSON trace exports (`POST /v1/traces`); keeps every span and request's headers. */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly headers: Record<string, unknown>[] = [];
  /** Base URL (OTEL_EXPORTER_OTLP_ENDPOINT); traces go to `${url}/v1/traces`. */
  url = "";
  private readonly app: FastifyInstance;

  private constructor() {
    this.app = Fastify({
      logger: false,
      bodyLimit: 100 * 1024 * 1024,
      forceCloseConnections: true,
    });
    this.app.post("/v1/traces", async (req) => {
      this.headers.push(req.headers);
      const body = req.body as { resourceSpans?: any[] };
      for (const rs of body.resourceSpans ?? []) {
        const service = flatten(rs.resource?.attributes)["service.name"] as string | undefined;
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            this.spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
              name: s.name,
              kind: s.kind,
              attributes: flatten(s.attributes),
              status: s.status,
              startTimeUnixNano: String(s.startTimeUnixNano),
              endTimeUnixNano: String(s.endTimeUnixNano),
              service,
            });
      }
      return { partialSuccess: {} };
    });
  }

  static async start(): Promise<OtlpReceiver> {
    const r = new OtlpReceiver();
    r.url = (await r.app.listen({ host: "127.0.0.1", port: 0 })).replace("localhost", "127.0.0.1");
    return r;
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}
