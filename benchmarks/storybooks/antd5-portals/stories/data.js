// Fixed data for every story: no generated ids, no Date.now(), no random values.
import dayjs from 'dayjs';

export const day = dayjs('2024-03-14T10:30:00');

export const people = [
  { key: 1, name: 'Mara Lindqvist', age: 34, city: 'Uppsala', role: 'admin', joined: '2021-04-02' },
  { key: 2, name: 'Otto Brandt', age: 41, city: 'Bremen', role: 'editor', joined: '2019-11-20' },
  { key: 3, name: 'Ines Carvalho', age: 28, city: 'Porto', role: 'viewer', joined: '2023-01-09' },
  { key: 4, name: 'Kenji Sato', age: 52, city: 'Sendai', role: 'editor', joined: '2018-06-30' },
  { key: 5, name: 'Amara Okafor', age: 37, city: 'Lagos', role: 'admin', joined: '2020-08-15' },
  { key: 6, name: 'Luca Moretti', age: 45, city: 'Turin', role: 'viewer', joined: '2022-02-11' },
  { key: 7, name: 'Sofia Novak', age: 31, city: 'Brno', role: 'editor', joined: '2021-12-01' },
  { key: 8, name: 'Priya Raman', age: 29, city: 'Chennai', role: 'viewer', joined: '2024-01-22' },
  { key: 9, name: 'Jonas Berg', age: 60, city: 'Bergen', role: 'admin', joined: '2017-03-05' },
  { key: 10, name: 'Chloe Martin', age: 26, city: 'Lyon', role: 'viewer', joined: '2023-09-17' },
  { key: 11, name: 'Diego Ruiz', age: 39, city: 'Seville', role: 'editor', joined: '2020-05-27' },
  { key: 12, name: 'Hana Kim', age: 33, city: 'Busan', role: 'viewer', joined: '2022-10-03' },
];

export const cities = ['Uppsala', 'Bremen', 'Porto', 'Sendai', 'Lagos', 'Turin', 'Brno', 'Chennai'].map((c) => ({
  value: c.toLowerCase(),
  label: c,
}));

export const tree = [
  {
    title: 'Europe', value: 'eu', key: 'eu',
    children: [
      { title: 'Sweden', value: 'se', key: 'se', children: [{ title: 'Uppsala', value: 'upp', key: 'upp' }] },
      { title: 'Germany', value: 'de', key: 'de', children: [{ title: 'Bremen', value: 'bre', key: 'bre' }] },
      { title: 'Portugal', value: 'pt', key: 'pt' },
    ],
  },
  { title: 'Asia', value: 'as', key: 'as', children: [{ title: 'Japan', value: 'jp', key: 'jp' }, { title: 'India', value: 'in', key: 'in' }] },
  { title: 'Africa', value: 'af', key: 'af', children: [{ title: 'Nigeria', value: 'ng', key: 'ng' }] },
];
