// Postgres URLs without the driver: choosing the adapter and naming a URL in messages need no
// `pg` (~200 KB), which only the Postgres adapter's own modules load.

/** A URL fit for messages: the password replaced by ***. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@");
  }
}

/** True for the URLs that select the Postgres adapter. */
export function isPostgresUrl(url: string | undefined): url is string {
  return Boolean(url && /^postgres(ql)?:\/\//i.test(url));
}
