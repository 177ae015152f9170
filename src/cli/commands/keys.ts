import { Command } from "commander";
import { readEnv } from "../../config/env.ts";
import { CodehopError, ErrorCodes } from "../../errors.ts";

/** Flags every `codehop keys` subcommand takes. */
interface KeysFlags {
  databaseUrl?: string;
  schema?: string;
  json?: boolean;
}

/** Opens the key store of the database the flags name (creating its table on first use). */
async function openKeys(flags: KeysFlags) {
  const { openPool, schemaOf } = await import("../../persistence/postgres-database.ts");
  const { ApiKeyStore } = await import("../../server/api-keys.ts");
  const url = flags.databaseUrl ?? readEnv().databaseUrl;
  if (!url)
    throw new CodehopError(
      ErrorCodes.CONFIG_INVALID,
      "codehop keys needs the database of `codehop serve`: set CODEHOP_DATABASE_URL or pass --database-url.",
    );
  const schema = schemaOf({ url, schema: flags.schema });
  const pool = await openPool({ url, schema, poolSize: 2 });
  const store = new ApiKeyStore(pool, schema);
  await store.ensureTable();
  return { store, close: () => pool.end() };
}

const withDatabase = (command: Command) =>
  command
    .option(
      "--database-url <url>",
      "postgres:// URL of the server's database (default CODEHOP_DATABASE_URL)",
    )
    .option("--schema <name>", "schema of codehop's tables", "public")
    .option("--json", "print JSON");

/**
 * `codehop keys`: API keys of `codehop serve --auth keys`, each mapped to a user: `add` makes one
 * (printed once; only its hash is stored), `list` shows them (never a secret), `revoke` stops one
 * (within seconds on every server).
 */
export default function keysCommand(): Command {
  const keys = new Command("keys").description(
    "API keys of `codehop serve --auth keys`, each mapped to a user: add, list, revoke",
  );
  keys.addCommand(
    withDatabase(
      new Command("add")
        .description("make a key for a user and print it (shown once: only its hash is kept)")
        .argument("<user>", "the user's identity (owner of what the key's holder creates)")
        .option("--label <text>", "a note to tell keys apart (who holds it, where it is used)")
        .option(
          "--permission <name...>",
          "permissions handed to graphs (langgraph_auth_permissions)",
        ),
    ).action(async (user: string, flags: KeysFlags & { label?: string; permission?: string[] }) => {
      const { store, close } = await openKeys(flags);
      try {
        const { key, keyId } = await store.add(user, {
          label: flags.label,
          permissions: flags.permission,
        });
        if (flags.json) process.stdout.write(`${JSON.stringify({ key, key_id: keyId, user })}\n`);
        else {
          process.stdout.write(`${key}\n`);
          process.stderr.write(
            `codehop keys: key ${keyId} for ${user}; it is not shown again (revoke: codehop keys revoke ${keyId})\n`,
          );
        }
      } finally {
        await close();
      }
    }),
  );
  keys.addCommand(
    withDatabase(new Command("list").description("list the keys (never their secrets)")).action(
      async (flags: KeysFlags) => {
        const { store, close } = await openKeys(flags);
        try {
          const rows = await store.list();
          if (flags.json) {
            process.stdout.write(
              `${JSON.stringify(
                rows.map((r) => ({
                  key_id: r.keyId,
                  user: r.identity,
                  label: r.label,
                  permissions: r.permissions,
                  created_at: r.createdAt,
                  revoked_at: r.revokedAt,
                  last_used_at: r.lastUsedAt,
                })),
              )}\n`,
            );
            return;
          }
          if (!rows.length) process.stdout.write("no keys (codehop keys add <user>)\n");
          for (const r of rows)
            process.stdout.write(
              `${r.keyId}  ${r.identity}${r.label ? ` (${r.label})` : ""}  created ${r.createdAt}${r.revokedAt ? `  REVOKED ${r.revokedAt}` : r.lastUsedAt ? `  last used ${r.lastUsedAt}` : "  never used"}\n`,
            );
        } finally {
          await close();
        }
      },
    ),
  );
  keys.addCommand(
    withDatabase(
      new Command("revoke")
        .description("revoke a key (by its id, or the key itself)")
        .argument("<key-id>", "the key's id (codehop keys list) or the key"),
    ).action(async (keyId: string, flags: KeysFlags) => {
      const { store, close } = await openKeys(flags);
      try {
        const revoked = await store.revoke(keyId);
        if (!revoked)
          throw new CodehopError(
            ErrorCodes.CONFIG_INVALID,
            `No live key ${keyId} (codehop keys list shows them).`,
          );
        if (flags.json)
          process.stdout.write(`${JSON.stringify({ key_id: keyId, revoked: true })}\n`);
        else process.stderr.write(`codehop keys: ${keyId} revoked\n`);
      } finally {
        await close();
      }
    }),
  );
  return keys;
}
