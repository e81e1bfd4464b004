import React from 'react';
import { Badge, Space, Table, Tag } from 'antd';
import { people } from './data.js';

export default { title: 'Data/Table' };

const roleColor = { admin: 'volcano', editor: 'geekblue', viewer: 'green' };
const columns = [
  { title: 'Name', dataIndex: 'name', key: 'name', sorter: (a, b) => a.name.localeCompare(b.name) },
  { title: 'Age', dataIndex: 'age', key: 'age', sorter: (a, b) => a.age - b.age, align: 'right' },
  { title: 'City', dataIndex: 'city', key: 'city',
    filters: [{ text: 'Porto', value: 'Porto' }, { text: 'Brno', value: 'Brno' }], onFilter: (v, r) => r.city === v },
  { title: 'Role', dataIndex: 'role', key: 'role', render: (r) => <Tag color={roleColor[r]}>{r}</Tag> },
  { title: 'Joined', dataIndex: 'joined', key: 'joined' },
];

export const Basic = { render: () => <Table columns={columns} dataSource={people.slice(0, 6)} pagination={false} /> };
export const Paginated = { render: () => <Table columns={columns} dataSource={people} pagination={{ pageSize: 5 }} /> };
export const Sorted = {
  render: () => <Table columns={columns.map((c) => (c.key === 'age' ? { ...c, defaultSortOrder: 'descend' } : c))} dataSource={people} pagination={false} size="small" />,
};
export const RowSelection = {
  render: () => <Table rowSelection={{ defaultSelectedRowKeys: [2, 5] }} columns={columns} dataSource={people.slice(0, 8)} pagination={false} />,
};
export const Expandable = {
  render: () => (
    <Table columns={columns} dataSource={people.slice(0, 5)} pagination={false}
      expandable={{ defaultExpandedRowKeys: [1, 3], expandedRowRender: (r) => <p style={{ margin: 0 }}>{r.name} lives in {r.city}.</p> }} />
  ),
};
export const ScrollFixedHeader = {
  render: () => <Table columns={columns} dataSource={people} pagination={false} scroll={{ y: 240 }} bordered />,
};
export const GroupedColumns = {
  render: () => (
    <Table bordered pagination={false} dataSource={people.slice(0, 5)}
      columns={[
        { title: 'Name', dataIndex: 'name' },
        { title: 'Profile', children: [{ title: 'Age', dataIndex: 'age' }, { title: 'City', dataIndex: 'city' }] },
        { title: 'Status', dataIndex: 'role', render: (r) => <Badge status={r === 'admin' ? 'error' : 'success'} text={r} /> },
      ]} />
  ),
};
export const FilterDropdownOpen = {
  render: () => (
    <div style={{ height: 420 }}>
      <Table dataSource={people.slice(0, 4)} pagination={false}
        columns={columns.map((c) => (c.key === 'city' ? { ...c, filterDropdownOpen: true } : c))} />
    </div>
  ),
};
export const Empty = { render: () => <Table columns={columns} dataSource={[]} /> };
export const Summary = {
  render: () => (
    <Table columns={columns.slice(0, 2)} dataSource={people.slice(0, 4)} pagination={false}
      summary={(rows) => (
        <Table.Summary.Row>
          <Table.Summary.Cell index={0}>Total</Table.Summary.Cell>
          <Table.Summary.Cell index={1} align="right">{rows.reduce((s, r) => s + r.age, 0)}</Table.Summary.Cell>
        </Table.Summary.Row>
      )} />
  ),
};
