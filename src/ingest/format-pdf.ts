import { neutralizeHeadings } from "./document-text.ts";
import { pageLabel, unreadable, type FormatReader } from "./format-types.ts";

/**
 * PDF text by unpdf (PDF.js's serverless build), one `## p. N` section per page. Bounded by the
 * page limit and the reading time (pages past either are left out, the document marked
 * truncated); a page whose own parse never ends (a PDF object loop) is stopped by the reader
 * process's deadline.
 */
export const readPdf: FormatReader = async ({ name, bytes }, { limits, overTime }) => {
  // Loaded on use: PDF.js is a large module most reads never need.
  const { getDocumentProxy } = await import("unpdf");
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // PDF.js takes ownership of (and detaches) the buffer it is given: hand it a copy.
    // verbosity 0: PDF.js's warnings ("Indexing all PDF objects") would go to the console.
    pdf = await getDocumentProxy(new Uint8Array(bytes), { isEvalSupported: false, verbosity: 0 });
  } catch (err) {
    const kind = (err as { name?: string })?.name ?? "";
    if (kind === "PasswordException") {
      throw unreadable(
        `${name} is an encrypted (password-protected) PDF; codehop cannot read it. Remove the password (e.g. print it to a new PDF) and attach it again.`,
        err,
      );
    }
    if (kind === "InvalidPDFException" || kind === "FormatError") {
      throw unreadable(`${name} is a corrupt or truncated PDF (${(err as Error).message}).`, err);
    }
    throw unreadable(`${name} could not be read as a PDF: ${(err as Error).message}`, err);
  }
  try {
    const pages = Math.min(pdf.numPages, limits.maxPages);
    const parts: string[] = [];
    let read = 0;
    for (let n = 1; n <= pages; n++) {
      if (n > 1 && overTime()) break;
      const page = await pdf.getPage(n);
      const content = await page.getTextContent();
      const text = content.items
        .map((item) => ("str" in item ? item.str + (item.hasEOL ? "\n" : "") : ""))
        .join("")
        .replace(/[ \t]+\n/g, "\n")
        .trim();
      page.cleanup();
      read = n;
      if (text) parts.push(`## ${pageLabel(n)}\n${neutralizeHeadings(text)}`);
    }
    const truncation =
      read < pdf.numPages
        ? read < pages
          ? `read ${read} of ${pdf.numPages} pages within the ${limits.timeoutMs / 1000} s reading time limit (CODEHOP_READER_TIMEOUT_MS raises it)`
          : `read the first ${read} of ${pdf.numPages} pages (the page limit, CODEHOP_READER_MAX_PAGES)`
        : undefined;
    return {
      text: parts.join("\n\n"),
      pages: pdf.numPages,
      ...(truncation ? { truncated: true, truncation } : {}),
    };
  } catch (err) {
    throw unreadable(`${name} is a damaged PDF: ${(err as Error).message}`, err);
  } finally {
    await pdf.destroy().catch(() => {});
  }
};
