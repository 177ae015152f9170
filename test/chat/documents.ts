import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Document, HeadingLevel, Packer, Paragraph } from "docx";
import PDFDocument from "pdfkit";
import {
  DEMO_BUDGET_SECTIONS,
  DEMO_FILES,
  DEMO_REPORT_PAGES,
} from "../../src/apps/chat/demo-trajectories.ts";

/**
 * Test documents made with real libraries: PDFs with pdfkit (one text page per entry, optionally
 * password-protected), DOCX files with docx (a heading and its paragraphs per section), and a
 * local HTTP server for links.
 */

/** A PDF with one page per string (lines become lines), encrypted when `password` is given. */
export function makePdf(
  pages: readonly string[],
  options: { password?: string } = {},
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const doc = new PDFDocument({
      autoFirstPage: false,
      ...(options.password
        ? { userPassword: options.password, ownerPassword: `${options.password}!` }
        : {}),
    });
    const chunks: Buffer[] = [];
    doc.on("data", (c: Buffer) => chunks.push(c));
    doc.on("end", () => resolve(Buffer.concat(chunks)));
    doc.on("error", reject);
    for (const page of pages) {
      doc.addPage();
      doc.fontSize(12).text(page);
    }
    doc.end();
  });
}

/** A DOCX with a level-1 heading and its paragraphs per section. */
export async function makeDocx(
  sections: ReadonlyArray<{ heading: string; paragraphs: readonly string[] }>,
): Promise<Buffer> {
  const children = sections.flatMap((s) => [
    new Paragraph({ text: s.heading, heading: HeadingLevel.HEADING_1 }),
    ...s.paragraphs.map((p) => new Paragraph(p)),
  ]);
  return Packer.toBuffer(new Document({ sections: [{ children }] }));
}

/** Writes the demo's report (PDF) and budget (DOCX) into `dir`; returns their paths. */
export async function writeDemoDocuments(dir: string): Promise<{ report: string; budget: string }> {
  const report = join(dir, DEMO_FILES.report);
  const budget = join(dir, DEMO_FILES.budget);
  writeFileSync(report, await makePdf(DEMO_REPORT_PAGES));
  writeFileSync(budget, await makeDocx(DEMO_BUDGET_SECTIONS));
  return { report, budget };
}

/**
 * A human message as agent-chat-ui sends one with a PDF: its text, then the file as a base64
 * `file` content block.
 */
export function messageWithPdf(id: string, text: string, base64: string, filename: string) {
  return {
    id,
    type: "human",
    content: [
      { type: "text", text },
      { type: "file", mimeType: "application/pdf", data: base64, metadata: { filename } },
    ],
  };
}

/** A local HTTP server answering with `handler`; `url(path)` is its address. */
export async function startHttpServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: (path: string) => string; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as { port: number };
  return {
    server,
    url: (path) => `http://127.0.0.1:${port}${path}`,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
