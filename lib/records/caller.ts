import type { RequestInfo } from '../query/request-info.js';

/** Who is asking and what they sent: everything the rules may look at. */
export interface Caller {
  readonly request: RequestInfo;
}

/** Superusers bypass rules and may see and filter hidden fields. */
export function isSuperuser(caller: Caller): boolean {
  return caller.request.auth?.superuser === true;
}
