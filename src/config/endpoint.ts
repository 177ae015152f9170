/**
 * " — OPENAI_BASE_URL http://host:8000 does not end with /v1 ..." when the base URL misses the
 * /v1 that OpenAI-compatible servers serve their API under; "" otherwise.
 */
export function v1Hint(baseURL: string | undefined): string {
  if (!baseURL) return "";
  let path: string;
  try {
    path = new URL(baseURL).pathname.replace(/\/+$/, "");
  } catch {
    return "";
  }
  if (path.endsWith("/v1")) return "";
  return (
    ` — OPENAI_BASE_URL ${baseURL} does not end with /v1, where OpenAI-compatible servers ` +
    `(vLLM, Ollama, llama.cpp, OpenAI) serve their API: try ${baseURL.replace(/\/+$/, "")}/v1`
  );
}
