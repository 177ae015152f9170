import type { SearchResult } from "../../web/index.ts";
import { contentTokens } from "../../store/text.ts";

/**
 * How web research ranks search results before any page is read: the rule set of
 * docs/research.md ("Research on the web"), in this one place.
 *
 * 1. **Deny list**: results on an operator-denied domain (or a subdomain of one) are left out.
 * 2. **Duplicates folded**: results whose URLs are the same page (scheme, `www.`/`m.`/`mobile.`,
 *    fragment, tracking parameters, trailing slash and `index.html` ignored), or that share host and
 *    title, are one result (the better-ranked one).
 * 3. **Relevance** (0..1): 0.6 × the share of the query's content words found in the result's
 *    title, URL and snippet, plus 0.4 × the provider's own order (1 for its first result, falling
 *    linearly to 0 after the last).
 * 4. **Credibility** added to relevance: primary sources +0.5 (the operator's allow list;
 *    government, military, academic and intergovernmental domains — `.gov`, `.mil`, `.edu`,
 *    `.ac.<cc>`, `.int`, `.gov.<cc>`, `.edu.<cc>`, `europa.eu`; standards bodies and scholarly
 *    records; and the subject's own site, a domain whose name is a word of the query), reference
 *    works +0.2, user-generated sites −0.3 (forums, social networks, Q&A, video).
 * 5. **Diversity**: at most {@link WebRules.maxPerDomain} results of one host before the others;
 *    the rest follow.
 */

/** The operator's rules of web research. */
export interface WebRules {
  /** Domains always ranked as primary sources (a domain covers its subdomains). */
  allowDomains: readonly string[];
  /** Domains never searched or read (a domain covers its subdomains). */
  denyDomains: readonly string[];
  /** Results of one host before other hosts' (default 2). */
  maxPerDomain: number;
}

/** Defaults: no lists, two results per host. */
export const DEFAULT_WEB_RULES: Readonly<WebRules> = {
  allowDomains: [],
  denyDomains: [],
  maxPerDomain: 2,
};

/** Credibility tiers and what each adds to relevance. */
export const CREDIBILITY_BONUS = {
  primary: 0.5,
  reference: 0.2,
  general: 0,
  user_generated: -0.3,
} as const;

/** A credibility tier. */
export type Credibility = keyof typeof CREDIBILITY_BONUS;

/** Standards bodies and scholarly records: primary sources whatever their top-level domain. */
const PRIMARY_DOMAINS = [
  "w3.org",
  "ietf.org",
  "rfc-editor.org",
  "iso.org",
  "doi.org",
  "arxiv.org",
  "europa.eu",
  "un.org",
];

/** Encyclopedias and wire services. */
const REFERENCE_DOMAINS = [
  "wikipedia.org",
  "britannica.com",
  "reuters.com",
  "apnews.com",
  "nature.com",
  "science.org",
];

/** Forums, social networks, Q&A and video sites: anyone writes there, unchecked. */
const USER_GENERATED_DOMAINS = [
  "reddit.com",
  "quora.com",
  "answers.com",
  "facebook.com",
  "x.com",
  "twitter.com",
  "instagram.com",
  "tiktok.com",
  "pinterest.com",
  "medium.com",
  "youtube.com",
  "fandom.com",
];

/** Institutional top-level domains: `.gov`, `.mil`, `.edu`, `.int`, and `.gov.uk`, `.ac.jp`, `.edu.au` ... */
const INSTITUTIONAL = /(^|\.)(gov|mil|edu|int)$|(^|\.)(gov|ac|edu|mil)\.[a-z]{2}$/;

/** Query parameters that only track where a click came from. */
const TRACKING = /^(utm_.*|fbclid|gclid|msclkid|mc_cid|mc_eid|ref|ref_src|_hsenc|_hsmi|igshid)$/i;

/** True when `host` is `domain` or one of its subdomains. */
export function onDomain(host: string, domain: string): boolean {
  const d = domain.toLowerCase().replace(/^\*?\./, "");
  const h = host.toLowerCase();
  return h === d || h.endsWith(`.${d}`);
}

function hostOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.hostname.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}

/** The key two URLs of the same page share (see the module's rule 2). */
export function pageKey(url: string): string {
  try {
    const u = new URL(url);
    const host = u.hostname.toLowerCase().replace(/^(www\d*|m|mobile)\./, "");
    const params = [...u.searchParams.entries()]
      .filter(([k]) => !TRACKING.test(k))
      .sort(([a], [b]) => a.localeCompare(b));
    const path = u.pathname.replace(/\/(index\.(html?|php))?$/i, "") || "";
    const query = params.length ? `?${new URLSearchParams(params).toString()}` : "";
    return `${host}${path}${query}`;
  } catch {
    return url;
  }
}

/** The credibility tier of a URL for a query under the operator's rules (rule 4). */
export function credibilityOf(url: string, query: string, rules: WebRules): Credibility {
  const host = hostOf(url);
  if (!host) return "general";
  if (rules.allowDomains.some((d) => onDomain(host, d))) return "primary";
  if (INSTITUTIONAL.test(host) || PRIMARY_DOMAINS.some((d) => onDomain(host, d))) return "primary";
  if (USER_GENERATED_DOMAINS.some((d) => onDomain(host, d))) return "user_generated";
  if (REFERENCE_DOMAINS.some((d) => onDomain(host, d))) return "reference";
  // The subject's own site: "zstd" → facebook.github.io/zstd is not, zstd.net is (its name is a
  // word of the query). Names of 3 letters or fewer say too little.
  const words = new Set(contentTokens(query));
  const labels = host.split(".").slice(0, -1);
  if (labels.some((l) => l.length > 3 && words.has(l))) return "primary";
  return "general";
}

/** A search result as ranked. */
export interface RankedResult extends SearchResult {
  host: string;
  credibility: Credibility;
  relevance: number;
  score: number;
}

/** What ranking did with a search's results. */
export interface RankedResults {
  results: RankedResult[];
  /** Results on a denied domain, left out. */
  denied: number;
  /** Duplicates folded into a better-ranked result. */
  folded: number;
}

/** Ranks a search's results by the rules of this module (best first). */
export function rankResults(query: string, found: SearchResult[], rules: WebRules): RankedResults {
  const words = [...new Set(contentTokens(query))];
  let denied = 0;
  let folded = 0;
  const seen = new Set<string>();
  const kept: RankedResult[] = [];
  found.forEach((r, i) => {
    const host = hostOf(r.url);
    if (!host) return;
    if (rules.denyDomains.some((d) => onDomain(host, d))) {
      denied++;
      return;
    }
    const keys = [pageKey(r.url), `${host.replace(/^www\./, "")}\u0000${r.title.toLowerCase()}`];
    if (keys.some((k) => seen.has(k))) {
      folded++;
      return;
    }
    keys.forEach((k) => seen.add(k));
    const haystack = new Set(contentTokens(`${r.title} ${r.url} ${r.snippet}`));
    const matched = words.length ? words.filter((w) => haystack.has(w)).length / words.length : 0;
    const order = found.length > 1 ? 1 - i / found.length : 1;
    const relevance = 0.6 * matched + 0.4 * order;
    const credibility = credibilityOf(r.url, query, rules);
    kept.push({
      ...r,
      host,
      credibility,
      relevance,
      score: relevance + CREDIBILITY_BONUS[credibility],
    });
  });
  kept.sort((a, b) => b.score - a.score);
  // Diversity: a host's results past maxPerDomain go after every other result, in score order.
  const perHost = new Map<string, number>();
  const first: RankedResult[] = [];
  const later: RankedResult[] = [];
  for (const r of kept) {
    const n = (perHost.get(r.host) ?? 0) + 1;
    perHost.set(r.host, n);
    (n <= rules.maxPerDomain ? first : later).push(r);
  }
  return { results: [...first, ...later], denied, folded };
}

/** True when a URL's host is on the deny list. */
export function isDenied(url: string, rules: WebRules): boolean {
  const host = hostOf(url);
  return host !== undefined && rules.denyDomains.some((d) => onDomain(host, d));
}
