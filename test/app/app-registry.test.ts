/**
 * src/apps/registry.ts names every app without loading it: its outlines (what `codehop show`
 * reads threads back with) are copies of the apps' teams, kept equal here, and its loaders give
 * the same apps as src/apps/index.ts's APPS.
 */
import { describe, expect, it } from "vitest";
import { APPS } from "../../src/apps/index.ts";
import { APP_OUTLINES, appNameOf, loadApp } from "../../src/apps/registry.ts";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";

describe("the app registry", () => {
  it("names every app, and only those", () => {
    expect(Object.keys(APP_OUTLINES).sort()).toEqual(Object.keys(APPS).sort());
  });

  it.each(Object.keys(APPS))(
    "%s: the outline is the app's team, the loader the app",
    async (name) => {
      const app = APPS[name];
      expect(APP_OUTLINES[name]).toEqual({
        name: app.name,
        ...(app.rootName === undefined ? {} : { rootName: app.rootName }),
        team: {
          root: app.team.root,
          members: app.team.members.map((m) => ({ name: m.name, children: [...m.children] })),
        },
      });
      expect(await loadApp(name)).toBe(app);
    },
  );

  it("threads recorded before apps existed are QA threads; an unknown app is a clear error", async () => {
    expect(appNameOf(undefined)).toBe("qa");
    expect(appNameOf("")).toBe("qa");
    for (const bad of ["nope", "toString", "__proto__"]) {
      const err = (() => {
        try {
          appNameOf(bad);
        } catch (e) {
          return e;
        }
      })();
      expect(CodehopError.isInstance(err) && err.code).toBe(ErrorCodes.CONFIG_INVALID);
      expect((err as Error).message).toContain(`app "${bad}", which this codehop does not have`);
    }
    await expect(loadApp("nope")).rejects.toThrow(/apps: qa, research, chat, assistant/);
  });
});
