import { describe, expect, it } from "vitest";
import { CodehopError, ErrorCodes } from "../../src/errors.ts";
import { placeholders, renderTemplate } from "../../src/prompts/render.ts";

describe("renderTemplate (strict)", () => {
  it("fills every occurrence of a placeholder", () => {
    expect(renderTemplate("{{a}} and {{ a }} then {{b}}", { a: "x", b: 2 })).toBe("x and x then 2");
  });

  it("throws with a stable code when a placeholder has no value", () => {
    try {
      renderTemplate("Hello {{name}} {{tools}}", { name: "x" }, "t.md");
      expect.unreachable();
    } catch (err) {
      expect(CodehopError.isInstance(err)).toBe(true);
      expect((err as CodehopError).code).toBe(ErrorCodes.PROMPT_TEMPLATE);
      expect((err as Error).message).toContain("{{tools}}");
    }
  });

  it("throws when a value is given for a placeholder the template does not have", () => {
    expect(() => renderTemplate("Hello {{name}}", { name: "x", typo: "y" })).toThrow(
      /unknown placeholder.*typo/,
    );
  });

  it("does not re-expand placeholders inside substituted values", () => {
    expect(renderTemplate("{{a}}", { a: "{{b}}" })).toBe("{{b}}");
  });

  it("lists placeholders once each", () => {
    expect(placeholders("{{x}} {{y}} {{x}}")).toEqual(["x", "y"]);
  });
});
