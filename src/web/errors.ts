import { CodehopError, ErrorCodes } from "../errors.ts";

/**
 * Why a web operation failed, for callers that add their own advice (the assistant's tools tell
 * the model which tool to try instead): the message itself is complete without it.
 */
export type WebFailure =
  /** The host could not be reached, refused, reset or stopped answering. */
  | "unreachable"
  /** The deadline of the fetch passed. */
  | "timeout"
  /** The server answered an HTTP error status (404, 500 ...). */
  | "http_status"
  /** The link policy refused the address (private, loopback, link-local on a server). */
  | "refused"
  /** A body over the size cap. */
  | "too_large"
  /** Content that is not text (an image, audio, an archive, an executable ...). */
  | "binary"
  /** A page that has no readable text. */
  | "no_text"
  /** Not an http(s) URL, or a redirect loop. */
  | "bad_url"
  /** A search provider or archive that is down, rejects the key, or answers garbage. */
  | "provider"
  /** The real browser could not start or crashed. */
  | "browser";

/**
 * A web operation that failed for a reason the agent can act on (another URL, another tool, later):
 * INPUT_INVALID, or SOURCE_UNAVAILABLE for a search provider or archive — neither stops a run when
 * raised in a tool (src/errors.ts), so the model reads the message as its observation.
 */
export class WebError extends CodehopError {
  readonly failure: WebFailure;
  /** The HTTP status, for `http_status`. */
  readonly status?: number;
  /** The media type of `binary` content. */
  readonly mediaType?: string;

  constructor(
    failure: WebFailure,
    message: string,
    extra: { status?: number; mediaType?: string; cause?: unknown } = {},
  ) {
    super(
      failure === "provider" ? ErrorCodes.SOURCE_UNAVAILABLE : ErrorCodes.INPUT_INVALID,
      message,
      extra.cause === undefined ? undefined : { cause: extra.cause },
    );
    this.name = "WebError";
    this.failure = failure;
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.mediaType !== undefined) this.mediaType = extra.mediaType;
  }
}

/** The {@link WebFailure} of an error, when it is a {@link WebError}. */
export function webFailureOf(err: unknown): WebFailure | undefined {
  return err instanceof WebError ? err.failure : undefined;
}
