export { createRecordsRouter, type RecordsRouter } from './router.js';
export { createAppServer, appServerClasses, type AppServerClasses, type PrototypedApp } from './http/create-app-server.js';
export type { RecordsRouterOptions, Limits } from './options.js';
export type { FileSweepOptions } from './files/sweep-files.js';
export type { RealtimeSettings } from './realtime/realtime-hub.js';
export type { RateLimitOptions, RateLimitRuleOption, RateLimitAudience } from './db/rate-limits/rate-limit-settings.js';
export { diskStorage, type DiskStorage, type DiskStorageOptions } from './files/disk-storage.js';
export {
  StorageNotFoundError,
  InvalidStorageKeyError,
  assertStorageKey,
  assertStoragePrefix,
  assertByteRange,
  checkSourceSize,
  type Storage,
  type StorageWriteOptions,
  type StorageWriteResult,
  type ByteRange,
  type StoredObjectInfo,
  type StoredObject,
} from './files/storage.js';
export { RangeNotSatisfiableError } from './http/send-stored-file.js';
export type { ThumbnailFunction, ThumbnailInput, ThumbnailOutput } from './files/render-thumbnail.js';
export type { ThumbnailSpec, ThumbnailMode, ThumbnailFormat } from './files/thumbnail-spec.js';
export type { Identity, AuthFunction } from './auth/identity.js';
export type {
  RecordsApi,
  CollectionApi,
  RecordModel,
  RecordListPage,
  ActAs,
  ApiOptions,
  ListOptions,
  FullListOptions,
  AggregateOptions,
  AggregateItem,
  WriteBody,
} from './records/records-api.js';
export { fileFromPath, type FileInput, type PathFile } from './files/file-inputs.js';
export type {
  RecordHooks,
  CollectionHooks,
  HookCollection,
  BeforeCreateEvent,
  BeforeUpdateEvent,
  BeforeDeleteEvent,
  AfterWriteEvent,
} from './records/record-hooks.js';
export type { Logger, RequestLogEntry, RequestLogFunction } from './logger.js';
export type {
  CollectionDefinition,
  BaseCollectionDefinition,
  ViewCollectionDefinition,
  CollectionRules,
  FieldRules,
  FieldDefinition,
  FieldType,
  IndexDefinition,
  ColumnIndexDefinition,
  SearchIndexDefinition,
  SearchLanguage,
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
  EditorFieldDefinition,
  AutodateFieldDefinition,
  GeoPointFieldDefinition,
} from './schema/definitions.js';
export type { IdFieldDefinition } from './schema/record-id.js';
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
  ConflictError,
  BatchError,
  TooManyRequestsError,
  RateLimitError,
  type FieldError,
} from './errors.js';
export type { Migration, MigrationContext, MigrationModule, MigrationsOption, ChangeFieldTypeOptions, FieldTypeDefinition } from './migrations/migration-definition.js';
