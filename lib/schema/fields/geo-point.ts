/**
 * The `geoPoint` field type (PocketBase's `core/field_geo_point.go`): `{lon, lat}` in degrees,
 * `{lon: 0, lat: 0}` when empty. Filters and sort read `field.lon` and `field.lat` as numbers
 * (lib/query/resolve-path.ts), which is what `geoDistance()` takes.
 */
import type { FieldError } from '../../errors.js';
import { fail, readNumber, readSingle, succeed, type CoerceResult } from '../coerce-value.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, type FieldBase } from '../field-type-spec.js';
import type { GeoPoint } from '../storage-kinds.js';

/** A geoPoint field's declaration. `required` refuses the origin, as PocketBase does. */
export interface GeoPointFieldDefinition extends FieldBase {
  type: 'geoPoint';
}

/** The properties of a point a filter or sort may name after the field (`loc.lon`). */
export const GEO_POINT_KEYS = ['lon', 'lat'] as const;

const NOT_A_POINT: FieldError = { code: 'validation_invalid_value', message: 'Must be an object {"lon": number, "lat": number}.' };
const BAD_LATITUDE: FieldError = { code: 'validation_invalid_latitude', message: 'Latitude must be between -90 and 90 degrees.' };
const BAD_LONGITUDE: FieldError = { code: 'validation_invalid_longitude', message: 'Longitude must be between -180 and 180 degrees.' };
/** More text than any point needs: a longer string is not parsed at all. */
const MAX_POINT_TEXT = 200;

/** One coordinate: a number, or (multipart) its text; absent is 0, as PocketBase unmarshals it. */
function readCoordinate(raw: unknown): number | undefined {
  if (raw === undefined || raw === null) return 0;
  return readNumber(raw);
}

/**
 * Reads a point: an object with `lon` and `lat` (other keys are dropped, never stored), or its
 * JSON text (a multipart part); null, `""` and `{}` are the origin.
 */
function coerceGeoPoint(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined || raw === '') return succeed({ lon: 0, lat: 0 });
  let value: unknown = raw;
  if (typeof raw === 'string') {
    if (raw.length > MAX_POINT_TEXT) return fail(NOT_A_POINT.code, NOT_A_POINT.message);
    try {
      value = JSON.parse(raw) as unknown;
    } catch {
      return fail(NOT_A_POINT.code, NOT_A_POINT.message);
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return fail(NOT_A_POINT.code, NOT_A_POINT.message);
  const object = value as Record<string, unknown>;
  const lon = readCoordinate(Object.hasOwn(object, 'lon') ? object.lon : undefined);
  const lat = readCoordinate(Object.hasOwn(object, 'lat') ? object.lat : undefined);
  if (lon === undefined || lat === undefined) return fail(NOT_A_POINT.code, NOT_A_POINT.message);
  const point: GeoPoint = { lon, lat };
  return succeed(point);
}

/** The ranges, checked on every point but the origin (PocketBase's order: latitude first). */
function checkRanges(value: unknown): FieldError | null {
  const { lon, lat } = value as GeoPoint;
  if (lon === 0 && lat === 0) return null;
  if (!(lat >= -90 && lat <= 90)) return { ...BAD_LATITUDE };
  if (!(lon >= -180 && lon <= 180)) return { ...BAD_LONGITUDE };
  return null;
}

const POINT_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['lon', 'lat'],
  properties: {
    lon: { type: 'number', minimum: -180, maximum: 180, description: 'Longitude in degrees.' },
    lat: { type: 'number', minimum: -90, maximum: 90, description: 'Latitude in degrees.' },
  },
};

/** The geoPoint type (docs/collections.md). */
export const geoPointField = defineFieldType<GeoPointFieldDefinition>({
  type: 'geoPoint',
  storage: 'geoPoint',
  tooManyError: NOT_A_POINT,
  coerce: (_field, raw) => readSingle(raw, NOT_A_POINT, coerceGeoPoint),
  checkValue: (_field, value) => checkRanges(value),
  describe(field) {
    const record = { ...POINT_SCHEMA, description: 'A point; {"lon": 0, "lat": 0} when empty.' };
    const input = { ...POINT_SCHEMA, description: field.required ? 'A point other than {"lon": 0, "lat": 0}.' : 'A point; {"lon": 0, "lat": 0} (or null) for none.' };
    return sameInput(record, field.required ? input : { anyOf: [input, { type: 'null' }], description: input.description });
  },
});
