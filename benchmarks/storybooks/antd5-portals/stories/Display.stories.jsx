import React from 'react';
import {
  Avatar, Badge, Card, Collapse, Descriptions, Empty, List, Segmented, Space, Statistic, Timeline, Transfer, Tree,
} from 'antd';
import { UserOutlined } from '@ant-design/icons';
import { people, tree } from './data.js';

export default { title: 'Data/Display' };

export const CardGrid = {
  render: () => (
    <Card title="Projects" style={{ width: 640 }}>
      {['storyshelf', 'billing', 'docs', 'mobile', 'design', 'infra'].map((p) => <Card.Grid key={p} style={{ width: '33.3%' }}>{p}</Card.Grid>)}
    </Card>
  ),
};
export const Lists = {
  render: () => (
    <List style={{ width: 480 }} bordered dataSource={people.slice(0, 5)}
      renderItem={(p) => <List.Item><List.Item.Meta avatar={<Avatar>{p.name[0]}</Avatar>} title={p.name} description={`${p.city}, ${p.role}`} /></List.Item>} />
  ),
};
export const DescriptionsBordered = {
  render: () => (
    <Descriptions bordered title="Order #1042" items={[
      { key: 1, label: 'Customer', children: 'Mara Lindqvist' }, { key: 2, label: 'Total', children: '€ 214.00' },
      { key: 3, label: 'Status', children: <Badge status="processing" text="Shipping" /> }, { key: 4, label: 'Placed', children: '2024-03-14' },
      { key: 5, label: 'Address', span: 2, children: 'Dragarbrunnsgatan 12, 753 20 Uppsala' },
    ]} />
  ),
};
export const Trees = { render: () => <Tree checkable defaultExpandAll defaultCheckedKeys={['se']} treeData={tree} /> };
export const Collapses = {
  render: () => <Collapse defaultActiveKey={['1']} style={{ width: 520 }} items={[
    { key: '1', label: 'What is captured?', children: <p>Every story in the index.</p> },
    { key: '2', label: 'How are changes reviewed?', children: <p>In the report.</p> },
    { key: '3', label: 'Where are images kept?', children: <p>In the store.</p> },
  ]} />,
};
export const Timelines = {
  render: () => <Timeline items={[
    { children: 'Build queued 10:30' }, { color: 'green', children: 'Captured 35 stories 10:31' },
    { color: 'red', children: '3 changed 10:31' }, { color: 'gray', children: 'Review pending' },
  ]} />,
};
export const AvatarsBadges = {
  render: () => (
    <Space size="large">
      <Badge count={5}><Avatar shape="square" icon={<UserOutlined />} /></Badge>
      <Badge dot><Avatar icon={<UserOutlined />} /></Badge>
      <Badge count={120} overflowCount={99}><Avatar>ML</Avatar></Badge>
      <Avatar.Group max={{ count: 3 }}>{people.slice(0, 6).map((p) => <Avatar key={p.key}>{p.name[0]}</Avatar>)}</Avatar.Group>
      <Badge.Ribbon text="New"><Card size="small" style={{ width: 160 }}>Team plan</Card></Badge.Ribbon>
    </Space>
  ),
};
export const Statistics = {
  render: () => (
    <Space size={48}>
      <Statistic title="Active users" value={112893} />
      <Statistic title="Revenue" value={9321.5} precision={2} prefix="€" />
      <Statistic title="Churn" value={2.3} suffix="%" valueStyle={{ color: '#cf1322' }} />
    </Space>
  ),
};
export const Transfers = {
  render: () => <Transfer dataSource={people.slice(0, 8).map((p) => ({ key: String(p.key), title: p.name }))} targetKeys={['2', '5']} render={(i) => i.title} />,
};
export const Segments = { render: () => <Segmented defaultValue="Weekly" options={['Daily', 'Weekly', 'Monthly', 'Yearly']} /> };
export const EmptyState = { render: () => <Empty description="No builds yet" /> };
