import { resolve } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import { readEnv, type CodehopEnv } from "../../../config/env.ts";
import { withOperatorMark } from "../../../core/client-settings.ts";
import { readRunContext } from "../../../core/run-context.ts";

/**
 * What a conversation may reach on the machine that runs it. `attach: [{ path }]` reads that
 * machine's files, and a link may lead to its own network (127.0.0.1, 10.0.0.0/8, the cloud's
 * metadata service at 169.254.169.254 ...). Both are what a user wants from `codehop chat` and
 * `chat()` on their own machine, and what nobody may do through a served graph (Studio's server,
 * `codehop serve`), whose input comes from any client of the server.
 *
 * So the access is granted by code only: the CLI and the `chat()` API put a grant in the run
 * context (`chatAccess`), a server's own code may build its graph with one
 * (`createChatGraph({ access })`). A grant carries a mark JSON cannot express (a symbol), so a
 * client that sends `chatAccess` in its run's context or configurable gets nothing. Without a
 * grant — every graph of langgraph.json — local paths are refused (except, when the operator
 * names one, files under a directory meant for it: CODEHOP_CHAT_FILES_ROOT) and links to private,
 * loopback and link-local addresses are refused unless the environment of the process running the
 * graph allows them (CODEHOP_CHAT_ALLOW_PRIVATE_URLS=1). Both are the operator's decisions, read
 * from the environment in src/config/env.ts, never from a run's input.
 */

/** What a run may reach besides public web addresses. */
export interface ChatAccess {
  /** `attach: [{ path }]` reads files of the machine running the graph. */
  readonly localFiles: boolean;
  /** Links may lead to private, loopback and link-local addresses. */
  readonly privateNetwork: boolean;
  /**
   * Without `localFiles`: the one directory whose files (after symbolic links are followed) may
   * be attached by path; relative paths are relative to it. Unset: no local path at all.
   */
  readonly filesRoot?: string;
}

const GRANT = Symbol.for("codehop.chat.access");

/**
 * A grant of `access`, for the run context's `chatAccess` or `createChatGraph({ access })`
 * (unset fields are false). Only a grant made here counts: a plain object with the same fields is
 * ignored.
 */
export function grantChatAccess(access: Partial<ChatAccess>): ChatAccess {
  // The operator mark: a guarded (served) graph runs a context holding a grant as code's.
  return Object.freeze(
    withOperatorMark({
      localFiles: access.localFiles === true,
      privateNetwork: access.privateNetwork === true,
      ...(access.filesRoot ? { filesRoot: resolve(access.filesRoot) } : {}),
      [GRANT]: true,
    }),
  );
}

/** Whether `value` is a grant made by {@link grantChatAccess}. */
export function isChatAccessGrant(value: unknown): value is ChatAccess {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as Record<symbol, unknown>)[GRANT] === true
  );
}

/** The grant of the CLI and the `chat()` API: the user's own files and network. */
export const LOCAL_USER_ACCESS: ChatAccess = grantChatAccess({
  localFiles: true,
  privateNetwork: true,
});

/**
 * The access of a run without a grant: local files only under CODEHOP_CHAT_FILES_ROOT (none when
 * unset); private addresses only with CODEHOP_CHAT_ALLOW_PRIVATE_URLS=1.
 */
export function servedChatAccess(env: CodehopEnv = readEnv()): ChatAccess {
  return {
    localFiles: false,
    privateNetwork: env.chatAllowPrivateUrls === true,
    ...(env.chatFilesRoot ? { filesRoot: resolve(env.chatFilesRoot) } : {}),
  };
}

/** The access of a run: its run context's grant, else its graph's, else {@link servedChatAccess}. */
export function chatAccessOf(
  config: RunnableConfig | undefined,
  graphAccess?: ChatAccess,
): ChatAccess {
  const given = (readRunContext(config) as { chatAccess?: unknown }).chatAccess;
  if (isChatAccessGrant(given)) return given;
  if (isChatAccessGrant(graphAccess)) return graphAccess;
  return servedChatAccess();
}
