import type { CollectionDefinition } from '../../lib/index.js';

/**
 * The gallery's one collection: a photo with a title. Open to everyone, because the example has
 * no sign-in; a real app would write rules such as `create: '@request.auth.id != ""'`.
 */
export const galleryCollections: CollectionDefinition[] = [
  {
    name: 'photos',
    fields: [
      { name: 'title', type: 'text', max: 200 },
      {
        name: 'image',
        type: 'file',
        required: true,
        maxSize: 5 * 1024 * 1024,
        // Checked against the uploaded bytes, not the browser's claim or the file name.
        mimeTypes: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'],
        // Only these thumbnails are made; any other `thumb=` is a 400.
        thumbs: ['100x100', '300x0'],
      },
    ],
    rules: { list: '', view: '', create: '', update: null, delete: null },
  },
];
