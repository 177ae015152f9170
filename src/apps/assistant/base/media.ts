import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { readEnv } from "../../../config/env.ts";
import { readRunContext } from "../../../core/run-context.ts";
import { callModel, isRequestRefused, messageText, resolveModel } from "../../../core/models.ts";
import { usageFromMessage, type UsageTotals } from "../../../core/usage.ts";
import { loadUndici, megabytes } from "../../../ingest/fetch-url.ts";
import { renderPrompt } from "../../../prompts/render.ts";

/**
 * The model calls behind inspect_file and visualizer: a question about a file's text (the
 * `inspector` model), a question about an image (the `visualizer` model, which must be multimodal:
 * OpenAI-compatible `image_url` content parts — Qwen2.5-VL on vLLM, GPT-4o ...), and audio to text
 * through an OpenAI-compatible `/v1/audio/transcriptions` endpoint (whisper.cpp's server, vLLM,
 * OpenAI). Each model is the run's (`CODEHOP_MODEL_INSPECTOR` / `CODEHOP_MODEL_VISUALIZER` choose
 * others). An endpoint that refuses the request as it is (HTTP 400: a model without vision, a text
 * too long for its context) is an Error the agent reads; an endpoint that is down stops the run
 * (resumable), as for any agent's model call.
 */

/** Model names of the file tools (CODEHOP_MODEL_<NAME>, usage keys). */
export const INSPECTOR = "inspector";
export const VISUALIZER = "visualizer";

/** Characters of a file's text sent with a question (about 25k tokens). */
export const MAX_QUESTION_CHARS = 100_000;
/** Largest image sent to the model. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
/** Largest audio file sent to the transcription endpoint (OpenAI's limit). */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;

/** A model's answer and what it cost. */
export interface ModelAnswer {
  answer: string;
  usage: UsageTotals;
}

async function ask(
  name: string,
  config: RunnableConfig | undefined,
  messages: Array<SystemMessage | HumanMessage>,
  signal: AbortSignal | undefined,
  refused: string,
): Promise<ModelAnswer> {
  try {
    const reply = await callModel(await resolveModel(name, config), messages, {
      agentName: name,
      signal,
    });
    return { answer: messageText(reply).trim(), usage: usageFromMessage(reply) };
  } catch (err) {
    if (isRequestRefused(err)) throw new Error(`${refused} (${(err as Error).message})`);
    throw err;
  }
}

/** Answers `question` from a file's text (cut to {@link MAX_QUESTION_CHARS}). */
export async function answerFromText(
  config: RunnableConfig | undefined,
  file: { name: string; text: string },
  question: string,
  signal?: AbortSignal,
): Promise<ModelAnswer> {
  const cut = file.text.length > MAX_QUESTION_CHARS;
  const content = cut
    ? `${file.text.slice(0, MAX_QUESTION_CHARS)}\n[... the rest of the file (${file.text.length - MAX_QUESTION_CHARS} characters) is not shown]`
    : file.text;
  return ask(
    INSPECTOR,
    config,
    [
      new SystemMessage(renderPrompt("inspector/instructions.md", {})),
      new HumanMessage(
        renderPrompt("inspector/question.md", { file: file.name, content, question }),
      ),
    ],
    signal,
    `The inspector model could not take ${file.name} with the question: the file may be too long for its context; ask about a part of it`,
  );
}

/** The media type of an image from its first bytes (PNG, JPEG, GIF, WebP, BMP), if it is one. */
export function imageType(bytes: Uint8Array): string | undefined {
  const b = bytes;
  if (b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) return "image/png";
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38) return "image/gif";
  if (
    Buffer.from(b.subarray(0, 4)).toString("latin1") === "RIFF" &&
    Buffer.from(b.subarray(8, 12)).toString("latin1") === "WEBP"
  )
    return "image/webp";
  if (b[0] === 0x42 && b[1] === 0x4d) return "image/bmp";
  return undefined;
}

/** Asks the visualizer model `question` about an image (OpenAI-compatible `image_url` part). */
export async function askAboutImage(
  config: RunnableConfig | undefined,
  image: { name: string; bytes: Uint8Array; mediaType: string },
  question: string,
  signal?: AbortSignal,
): Promise<ModelAnswer> {
  if (image.bytes.byteLength > MAX_IMAGE_BYTES)
    throw new Error(
      `${image.name} is ${megabytes(image.bytes.byteLength)}, over the ${megabytes(MAX_IMAGE_BYTES)} an image may have.`,
    );
  const url = `data:${image.mediaType};base64,${Buffer.from(image.bytes).toString("base64")}`;
  return ask(
    VISUALIZER,
    config,
    [
      new SystemMessage(renderPrompt("visualizer/instructions.md", {})),
      new HumanMessage({
        content: [
          {
            type: "text",
            text: renderPrompt("visualizer/question.md", { image: image.name, question }),
          },
          { type: "image_url", image_url: { url } },
        ],
      }),
    ],
    signal,
    `The visualizer model refused the image: it may not read images (CODEHOP_MODEL_VISUALIZER names a multimodal model)`,
  );
}

/** Where audio goes: the transcription endpoint, model and key of a run. */
function transcriptionEndpoint(config: RunnableConfig | undefined) {
  const env = readEnv();
  const settings = readRunContext(config).modelSettings ?? {};
  const baseURL =
    env.transcriptionBaseUrl ??
    settings.baseURL ??
    env.openaiBaseUrl ??
    "https://api.openai.com/v1";
  const apiKey = env.transcriptionApiKey ?? settings.apiKey ?? env.openaiApiKey ?? "EMPTY";
  return {
    baseURL: baseURL.replace(/\/+$/, ""),
    apiKey,
    model: env.transcriptionModel ?? "whisper-1",
  };
}

/** Audio to text through `/v1/audio/transcriptions` (multipart `file` and `model`). */
export async function transcribe(
  config: RunnableConfig | undefined,
  audio: { name: string; bytes: Uint8Array; mediaType?: string },
  signal?: AbortSignal,
): Promise<string> {
  if (audio.bytes.byteLength > MAX_AUDIO_BYTES)
    throw new Error(
      `${audio.name} is ${megabytes(audio.bytes.byteLength)}, over the ${megabytes(MAX_AUDIO_BYTES)} a transcription takes.`,
    );
  const { baseURL, apiKey, model } = transcriptionEndpoint(config);
  const { FormData, fetch } = await loadUndici();
  const form = new FormData();
  form.append("model", model);
  form.append("response_format", "json");
  form.append(
    "file",
    new Blob([audio.bytes], { type: audio.mediaType ?? "application/octet-stream" }),
    audio.name,
  );
  const url = `${baseURL}/audio/transcriptions`;
  let res;
  try {
    res = await fetch(url, {
      method: "POST",
      body: form,
      headers: { authorization: `Bearer ${apiKey}` },
      signal: signal
        ? AbortSignal.any([signal, AbortSignal.timeout(300_000)])
        : AbortSignal.timeout(300_000),
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new Error(
      `The transcription endpoint ${url} could not be reached (${(err as Error).message}); the operator sets CODEHOP_TRANSCRIPTION_BASE_URL to a whisper server.`,
    );
  }
  const body = await res.text();
  if (!res.ok)
    throw new Error(
      `The transcription endpoint ${url} answered HTTP ${res.status}${res.status === 404 ? " (no transcription there: CODEHOP_TRANSCRIPTION_BASE_URL names a whisper server)" : ""}: ${body.slice(0, 200)}`,
    );
  let text: unknown;
  try {
    text = JSON.parse(body)?.text;
  } catch {
    text = body;
  }
  if (typeof text !== "string")
    throw new Error(`The transcription endpoint ${url} answered no text.`);
  return text.trim();
}
