export { createRecordsRouter, type RecordsRouter } from './router.js';
export type { RecordsRouterOptions, Limits } from './options.js';
export type { Identity, AuthFunction } from './auth/identity.js';
export type { Logger } from './http/logger.js';
export type {
  CollectionDefinition,
  CollectionRules,
  FieldDefinition,
  FieldType,
  IndexDefinition,
  Rule,
  TextFieldDefinition,
  NumberFieldDefinition,
  BoolFieldDefinition,
  EmailFieldDefinition,
  UrlFieldDefinition,
  DateFieldDefinition,
  SelectFieldDefinition,
  JsonFieldDefinition,
  RelationFieldDefinition,
  FileFieldDefinition,
} from './schema/definitions.js';
export {
  RecordbaseError,
  BadRequestError,
  UnauthorizedError,
  ForbiddenError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
  UnavailableError,
  InternalError,
  SchemaError,
  type FieldError,
} from './errors.js';
