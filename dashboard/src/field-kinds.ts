/**
 * The dashboard's one table of field types: for each, its table cell, its editor control, and
 * how a record's value becomes the control's draft and a draft the value sent. This is the one
 * place a type's dashboard behaviour goes (docs/contributing.md); a type it does not name (text,
 * and any the server adds before the dashboard knows it) is shown and edited as text.
 */
import type { ComponentChild } from 'preact';
import type { FieldInfo, RecordData } from './api.js';
import { FileCell, FlagCell, PointCell, RelationCell, TextCell, type CellProps } from './cells.js';
import {
  Checkbox,
  FileControl,
  makeTextArea,
  makeTextInput,
  PointControl,
  ReadOnlyInput,
  RelationControl,
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
}

/** The text-like default: one line of text in the table, an input, sent as typed. */
const TEXT: FieldKind = {
  Cell: TextCell,
  Control: makeTextInput({ type: 'text' }),
  labelled: true,
  toDraft: draftText,
  fromDraft: keepDraft,
  sent: true,
};

/** Each type that differs from the text-like default, by what differs. */
const FIELD_KINDS = new Map<string, FieldKind>([
  ['email', { ...TEXT, Control: makeTextInput({ type: 'email' }) }],
  ['url', { ...TEXT, Control: makeTextInput({ type: 'url' }) }],
  // A date is typed in the API's own format, which no browser date input writes.
  ['date', { ...TEXT, Control: makeTextInput({ type: 'text', placeholder: 'YYYY-MM-DD HH:MM:SS.sssZ' }) }],
  ['number', { ...TEXT, Control: makeTextInput({ type: 'number', step: 'any' }), fromDraft: parseNumber }],
  ['editor', { ...TEXT, Control: makeTextArea(6) }],
  ['json', { ...TEXT, Control: makeTextArea(5), toDraft: draftJson, fromDraft: parseJson }],
  ['autodate', { ...TEXT, Control: ReadOnlyInput, sent: false }],
  ['bool', { ...TEXT, Cell: FlagCell, Control: Checkbox, toDraft: (_field, value) => value === true }],
  ['select', { ...TEXT, Control: SelectControl, toDraft: draftChoice }],
  [
    'relation',
    {
      ...TEXT,
      Cell: RelationCell,
      Control: RelationControl,
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
