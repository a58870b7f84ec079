/**
 * Records per page when a list names none: PocketBase's 30, which its SDK assumes. The one
 * value the HTTP list, the server API's `getList` and the OpenAPI document's `perPage` share;
 * the cap is an option (`limits.maxPerPage`).
 */
export const DEFAULT_PER_PAGE = 30;
