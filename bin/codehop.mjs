#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's ESM loader (no build step), so `npx codehop`
// works right after `npm install` in a fresh clone.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
await main(process.argv);
