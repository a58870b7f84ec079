/** Every rule `""`: everyone may do everything. The fixture of suites that test something other than rules. */
export const OPEN_RULES = { list: '', view: '', create: '', update: '', delete: '' } as const;
