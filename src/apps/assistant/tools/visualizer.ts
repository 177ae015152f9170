import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";
import { defineTool, type CodeTool, type ToolCallContext } from "../../../tools/define-tool.ts";
import { httpGet } from "../../../web/http.ts";
import { downloadPolicy } from "../../../web/settings.ts";
import {
  assistantFilesOf,
  threadOf,
  webSettingsOf,
  type AssistantFilesDeps,
} from "../base/context.ts";
import { VISUALIZER, askAboutImage, imageType } from "../base/media.ts";
import { webProblem } from "./web.ts";

/**
 * `visualizer(image, question)`: asks the multimodal visualizer model a question about an image —
 * a file of the task (attached or downloaded) or an image on the web (`https://…/chart.png`, fetched
 * under the web settings' link policy and download cap).
 */
export function createVisualizerTool(deps: AssistantFilesDeps): CodeTool<any> {
  return defineTool({
    name: "visualizer",
    description:
      "Answers a question about an image (PNG, JPEG, GIF, WebP): a file of this task, or an image's web address. Reads text, numbers, charts and diagrams.",
    parameters: z.object({
      image: z.string().min(1).describe("the image file's name, or its http(s) address"),
      question: z.string().min(1).describe("what to find out from the image"),
    }),
    returns: "string",
    invoke: async ({ image, question }, ctx: ToolCallContext) => {
      const config = ctx.config as RunnableConfig | undefined;
      let name: string;
      let bytes: Uint8Array;
      if (/^https?:\/\//i.test(image.trim())) {
        try {
          const res = await httpGet(
            image.trim(),
            downloadPolicy(webSettingsOf(config)),
            ctx.signal,
          );
          name = res.name;
          bytes = res.bytes;
        } catch (err) {
          throw webProblem(err, ctx.signal);
        }
      } else {
        const real = assistantFilesOf(config, deps).resolve(threadOf(config), image);
        name = basename(real);
        bytes = await readFile(real);
      }
      const mediaType = imageType(bytes);
      if (!mediaType)
        throw new Error(
          `${name} is not an image codehop can show (PNG, JPEG, GIF, WebP, BMP): read other files with inspect_file(path, question).`,
        );
      const answer = await askAboutImage(config, { name, bytes, mediaType }, question, ctx.signal);
      ctx.report?.({ usage: { [VISUALIZER]: answer.usage } });
      return answer.answer;
    },
  });
}
