/**
 * The dashboard's one table of field types: for each, its table cell, its editor control, and
 * how a record's value becomes the control's draft and a draft the value sent. This is the one
 * place a type's dashboard behaviour goes (docs/contributing.md); a type it does not name (any
 * the server adds before the dashboard knows it) is shown and edited as text, and not searched.
 */
import type { ComponentChild } from 'preact';
import type { CollectionInfo, FieldInfo, RecordData } from './api.js';
import { FileCell, FlagCell, PointCell, RelationCell, TextCell, type CellProps } from './cells.js';
import {
  Checkbox,
  FileControl,
  makeRelationControl,
  makeTextArea,
  makeTextInput,
  PointControl,
  ReadOnlyInput,
  SelectControl,
  type ControlKind,
} from './field-controls.js';
import {
  asList,
  draftChoice,
  draftFiles,
  draftJson,
  draftPoint,
  draftText,
  keepDraft,
  parseJson,
  parseNumber,
  parsePoint,
  shapeList,
  type Draft,
  type FileDraft,
} from './field-drafts.js';

/** What the dashboard does with one field type. */
export interface FieldKind extends ControlKind {
  /** The content of the type's table cell. */
  Cell: (props: CellProps) => ComponentChild;
  /** A record's value (absent for a new record) as the control's draft. */
  toDraft: (field: FieldInfo, value: unknown) => Draft;
  /** The value the API takes for a draft, or a DraftError with the field's message. */
  fromDraft: (field: FieldInfo, draft: Draft) => unknown;
  /** Whether a save sends the field (false: the server sets it). */
  sent: boolean;
  /** Whether the relation picker searches the field's text (`~`) when it looks for a record of its collection. */
  searched: boolean;
}

/** The text-like default: one line of text in the table, an input, sent as typed. */
const TEXT: FieldKind = {
  Cell: TextCell,
  Control: makeTextInput({ type: 'text' }),
  labelled: true,
  toDraft: draftText,
  fromDraft: keepDraft,
  sent: true,
  searched: false,
};

/** Each type that differs from the text-like default, by what differs. */
const FIELD_KINDS = new Map<string, FieldKind>([
  ['text', { ...TEXT, searched: true }],
  ['email', { ...TEXT, Control: makeTextInput({ type: 'email' }), searched: true }],
  ['url', { ...TEXT, Control: makeTextInput({ type: 'url' }), searched: true }],
  // A date is typed in the API's own format, which no browser date input writes.
  ['date', { ...TEXT, Control: makeTextInput({ type: 'text', placeholder: 'YYYY-MM-DD HH:MM:SS.sssZ' }) }],
  ['number', { ...TEXT, Control: makeTextInput({ type: 'number', step: 'any' }), fromDraft: parseNumber }],
  ['editor', { ...TEXT, Control: makeTextArea(6), searched: true }],
  ['json', { ...TEXT, Control: makeTextArea(5), toDraft: draftJson, fromDraft: parseJson }],
  ['autodate', { ...TEXT, Control: ReadOnlyInput, sent: false }],
  ['bool', { ...TEXT, Cell: FlagCell, Control: Checkbox, toDraft: (_field, value) => value === true }],
  ['select', { ...TEXT, Control: SelectControl, toDraft: draftChoice }],
  [
    'relation',
    {
      ...TEXT,
      Cell: RelationCell,
      Control: makeRelationControl(searchedFields),
      labelled: false,
      toDraft: (_field, value) => asList(value),
      fromDraft: (field, draft) => shapeList(field, draft as string[]),
    },
  ],
  [
    'file',
    {
      ...TEXT,
      Cell: FileCell,
      Control: FileControl,
      toDraft: draftFiles,
      fromDraft: (field, draft) => shapeList(field, (draft as FileDraft).kept),
    },
  ],
  ['geoPoint', { ...TEXT, Cell: PointCell, Control: PointControl, labelled: false, toDraft: draftPoint, fromDraft: parsePoint }],
]);

/** The fields a search for a record of `collection` looks in, as PocketBase's picker does: the id and its text fields. */
export function searchedFields(collection: CollectionInfo): FieldInfo[] {
  return collection.fields.filter((f) => f.name === 'id' || fieldKind(f).searched);
}

/** A field's entry in the table (the text-like default for a type it does not name). */
export function fieldKind(field: FieldInfo): FieldKind {
  return FIELD_KINDS.get(field.type) ?? TEXT;
}

/** The drafts of a record's fields (a new record: every field empty). */
export function draftsOf(fields: FieldInfo[], record: RecordData | undefined): Record<string, Draft> {
  return Object.fromEntries(fields.map((f) => [f.name, fieldKind(f).toDraft(f, record?.[f.name])]));
}

/** The value the API takes for a field's draft (files: the names kept; uploads travel as parts). */
export function fromDraft(field: FieldInfo, draft: Draft): unknown {
  return fieldKind(field).fromDraft(field, draft);
}
