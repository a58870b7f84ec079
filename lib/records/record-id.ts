/**
 * Record ids for the modules above the schema (the record service, files): the format itself is
 * lib/schema/record-id.ts, the one module that knows it.
 */
export { generateRecordId, isRecordId } from '../schema/record-id.js';
